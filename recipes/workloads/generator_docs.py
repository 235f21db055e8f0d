"""``docs/generators.md``, written from the generator registry: every generator a recipe's
``workload: {generator: NAME, args: {...}}`` can name, what it builds, and each argument
with its default and meaning. A test fails when the committed page differs from it;
``python -m tdsched.recipes.workloads.generator_docs docs/generators.md`` rewrites it."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

from .registry import GENERATORS, Generator

GENERATED = (
    "<!-- generated from tdsched.recipes.workloads.registry by `python -m "
    "tdsched.recipes.workloads.generator_docs docs/generators.md`; do not edit by hand -->"
)
HEADER = (
    "# Workload generators\n\n"
    + GENERATED
    + """

A recipe's workload can be generated: `workload: {generator: NAME, args: {...}}` (YAML) or
`generator("NAME", ...)` (Python API). Each generator writes a linalg-on-tensors function
with static shapes and a numpy reference of it (in float64, cast back), which `run` checks
the build against on seeded random inputs. Arguments are keywords; those with a default
may be left out, and any may be a recipe parameter (`M: "${M}"`), so a sweep or a shape
table can change it. An unknown or missing argument is an error that names what the
generator takes.

| generator | builds |
|---|---|
"""
)


def page() -> str:
    """The whole page: an index, then one section per generator."""
    index = [f"| [`{name}`](#{name}) | {_markdown(g.summary)} |" for name, g in GENERATORS.items()]
    sections = [_section(name, g) for name, g in GENERATORS.items()]
    return HEADER + "\n".join(index) + "\n\n" + "\n\n".join(sections) + "\n"


def _section(name: str, generator: Generator) -> str:
    rows = ["| argument | default | meaning |", "|---|---|---|"]
    for parameter in generator.parameters():
        default = "required" if parameter.default is parameter.empty else f"`{parameter.default}`"
        rows.append(f"| `{parameter.name}` | {default} | {generator.arguments[parameter.name]} |")
    doc = _markdown(inspect.getdoc(generator.build) or "")
    return f"## {name}\n\n{doc}\n\n" + "\n".join(rows)


def _markdown(text: str) -> str:
    """A docstring's reST literals (````x````) as Markdown code (```x```)."""
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="where to write the page (docs/generators.md)")
    parser.add_argument("--check", action="store_true", help="exit 1 if it differs instead")
    args = parser.parse_args()
    text = page()
    if args.check:
        raise SystemExit(0 if args.path.read_text() == text else 1)
    args.path.write_text(text)


if __name__ == "__main__":
    main()
