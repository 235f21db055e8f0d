"""Option tables of the primitives' doc pages, and their index, generated from the step
registry.

Each ``docs/primitives/<primitive>.md`` carries a table of the step's options between two
markers; ``python -m tdsched.schedules.dsl.step_docs docs/primitives`` rewrites those tables
from :mod:`.steps` (adding an "Options" section to a page that has none) and writes the
index ``docs/primitives/README.md`` (every primitive, where it may appear, what it does:
its step class's first docstring line), and a test fails when a page's table or the
index differs from the registry. So a new primitive is listed everywhere by its
registration and its page.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .options import Kind, StepOption, step_options
from .steps import STEPS, StepBase, step_info
from .values import MATCH_FIELDS

BEGIN = "<!-- options: generated from tdsched.schedules.dsl.steps; do not edit by hand -->"
END = "<!-- end of options -->"


def options_table(cls: type[StepBase]) -> str:
    """The Markdown table of a step's options: key, value, default, meaning."""
    info = step_info(cls)
    rows = [
        f"Where: {info.scope.value}.",
        "",
        "| option | value | default | meaning |",
        "|---|---|---|---|",
    ]
    rows += [_row(opt) for opt in step_options(cls)]
    return "\n".join(rows)


def _row(opt: StepOption) -> str:
    if opt.spec.inline:
        keys = ", ".join(MATCH_FIELDS)
        return f"| {keys} | op selection (as in `match`) | at least one | {opt.spec.doc} |"
    default = "required" if opt.required else _value(opt.default)
    return f"| `{opt.key}` | {_kind(opt)} | {default} | {opt.spec.doc} |"


def _kind(opt: StepOption) -> str:
    if opt.spec.kind is Kind.CHOICE:
        return " or ".join(f"`{c}`" for c in opt.spec.choices)
    return str(opt.spec.kind.value)


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


INDEX = "README.md"
"""The index page's name in the primitives folder."""


def index_page() -> str:
    """The Markdown of the primitives' index: one row per registered primitive."""
    rows = [
        "# Primitives",
        "",
        "<!-- generated from tdsched.schedules.dsl.steps by "
        "`python -m tdsched.schedules.dsl.step_docs docs/primitives`; do not edit by hand -->",
        "",
        "Every step a recipe's `graph` or `kernels` schedules may hold, in the order the",
        "registry lists them; each page says what it does, shows an example and lists its",
        "options. Besides steps, a kernel may hold a [config](config.md) (tile sizes for",
        "IREE's own pipeline), and what IREE needs after a kernel's steps is its",
        "[codegen tail](codegen_tail.md).",
        "",
        "| primitive | where | what it does |",
        "|---|---|---|",
    ]
    for primitive, info in STEPS.items():
        what = (info.cls.__doc__ or "").strip().splitlines()[0]
        rows.append(f"| [{primitive}]({primitive}.md) | {info.scope.value} | {what} |")
    return "\n".join(rows) + "\n"


def update_page(page: Path, table: str) -> bool:
    """Put ``table`` between the markers of ``page`` (or in a new section at its end);
    returns whether the page changed."""
    text = page.read_text()
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        new = head + block + rest.split(END, 1)[1]
    else:
        new = text.rstrip("\n") + f"\n\n## Options\n\n{block}\n"
    if new != text:
        page.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tdsched.schedules.dsl.step_docs",
        description="Rewrite the option tables of docs/primitives/<primitive>.md and the "
        "index docs/primitives/README.md from the step registry.",
    )
    parser.add_argument("folder", type=Path, help="the docs/primitives folder")
    args = parser.parse_args(argv)
    missing = [p for p in STEPS if not (args.folder / f"{p}.md").is_file()]
    if missing:
        print(f"no doc page for: {', '.join(missing)} (write one first)", file=sys.stderr)
        return 1
    for primitive, info in STEPS.items():
        if update_page(args.folder / f"{primitive}.md", options_table(info.cls)):
            print(f"updated {primitive}.md")
    index = args.folder / INDEX
    if not index.is_file() or index.read_text() != index_page():
        index.write_text(index_page())
        print(f"updated {INDEX}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
