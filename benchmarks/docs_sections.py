"""Rewriting a generated section of a docs page, between ``<!-- NAME:begin -->`` and
``<!-- NAME:end -->``: the benchmark scripts' ``--update-docs PAGE --section NAME``.
Plain Python only, so a script that runs where tdsched is not installed can import it."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_options(parser: argparse.ArgumentParser, default: str) -> None:
    """``--update-docs PAGE`` and ``--section NAME`` (default ``default``)."""
    parser.add_argument("--update-docs", type=Path, help="rewrite a section of this file")
    parser.add_argument(
        "--section",
        default=default,
        help="the section --update-docs rewrites, between <!-- SECTION:begin --> and "
        f"<!-- SECTION:end --> (default {default})",
    )


def update_section(path: Path, name: str, text: str) -> None:
    """Replace the text between ``name``'s markers in ``path`` with ``text``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    page = path.read_text()
    if begin not in page or end not in page:
        raise SystemExit(f"{path}: no '{begin}' ... '{end}' markers to write between")
    head, rest = page.split(begin, 1)
    tail = rest.split(end, 1)[1]
    path.write_text(f"{head}{begin}\n{text}\n{end}{tail}")
