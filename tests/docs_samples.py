"""Test helper: the ``$ tdsched ...`` samples of the docs, and how their output is compared.

A sample is a fenced block whose first line is ``$ tdsched ...``: one or more commands,
each followed by the output the docs show (``$ echo $?`` and a number: the exit status of
the command before). The line before the block says how the docs test treats it:

* ``<!-- docs-sample: run -->``: run as shown, from the repository's root;
* ``<!-- docs-sample: run ARGS -->``: run with ``ARGS`` appended to each ``tdsched``
  command (a smaller shape, fewer repeats), the output compared all the same;
* ``<!-- docs-sample: run in NAME [ARGS] -->``: run in a fresh temporary folder holding a
  copy of ``docs/samples/NAME/`` (the example's files: a baseline, ``.mlir`` files, a
  sweep database), so that the sample finds what it names and what it writes stays
  there; paths under that folder are shown relative to it;
* ``<!-- docs-sample: not run: WHY -->``: shown, not run (it needs a GPU, or its
  output depends on more than the machine's numbers).

A block's first command is a ``tdsched`` command; later ones may be another program (``cat
perf.yaml`` shows a file the command before wrote; ``python`` is the tests' Python). Text after `` # `` on a command line is a
comment.

Output is compared by shape: numbers, with their sign, become ``#`` (timings and errors
differ from machine to machine, their places do not) and runs of spaces one space. A line ``...`` in the
sample stands for any lines; ``...`` within a line for any text there (so a line ending in
``...`` stands for any line starting as it does).
Every other line the command prints must be in the sample, in order (the checkout's path
shown relative, as the docs show shipped recipes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "docs" / "samples"
MARKER = re.compile(
    r"^<!-- docs-sample: (run(?: in (?P<folder>[\w.-]+))?(?: (?P<args>.*?))?"
    r"|not run: (?P<why>.+?)) -->$"
)
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass
class Step:
    """One command of a sample and the output shown after it."""

    command: str
    shown: list[str] = field(default_factory=list)


@dataclass
class Sample:
    """A ``$ tdsched`` block of a doc page."""

    path: Path
    line: int
    marker: str | None
    steps: list[Step]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def extra_args(self) -> str | None:
        """What ``run ARGS`` appends; ``None`` for a sample that is not run."""
        found = MARKER.match(self.marker or "")
        if found is None or found.group("why") is not None:
            return None
        return found.group("args") or ""

    @property
    def folder(self) -> Path | None:
        """The ``docs/samples/NAME`` folder a ``run in NAME`` sample runs in a copy of."""
        found = MARKER.match(self.marker or "")
        if found is None or found.group("folder") is None:
            return None
        return SAMPLES / found.group("folder")


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def samples(page: Path) -> list[Sample]:
    """The ``$ tdsched`` blocks of ``page``."""
    lines = page.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        if (
            lines[i].startswith("```")
            and i + 1 < len(lines)
            and lines[i + 1].startswith("$ tdsched")
        ):
            before = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), None)
            marker = before if before and before.startswith("<!-- docs-sample") else None
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            steps: list[Step] = []
            for text in lines[i + 1 : end]:
                if text.startswith("$ "):
                    steps.append(Step(text[2:]))
                else:
                    steps[-1].shown.append(text)
            found.append(Sample(page, i + 2, marker, steps))
            i = end
        i += 1
    return found


def shape(line: str) -> str:
    """A line as compared: numbers ``#``, runs of spaces one space, no trailing space."""
    return " ".join(_NUMBER.sub("#", line).split())


def mismatch(shown: list[str], printed: list[str]) -> str | None:
    """``None`` when ``printed`` has the shape of ``shown`` (module docstring), else the
    first shown line that does not match, with what was printed there."""
    pattern = []
    for line in shown:
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:  # "..." within a line: any text there (at its end: any line starting so)
            parts = [re.escape(shape(part)) for part in line.rstrip().split("...")]
            pattern.append(r"[^\n]*".join(parts) + r"\n")
    while printed and not printed[-1].strip():  # a blank line at the end is not shown
        printed = printed[:-1]
    text = "".join(shape(line) + "\n" for line in printed)
    if re.fullmatch("".join(pattern), text):
        return None
    # Name the first line from which the sample no longer matches.
    for k in range(len(shown), 0, -1):
        if re.match("".join(pattern[:k]), text):
            return f"from the sample's line {k + 1} ({shown[k] if k < len(shown) else 'end'!r})"
    return f"from its first line ({shown[0]!r})" if shown else "the sample shows no output"
