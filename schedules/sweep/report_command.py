"""``tdsched report DB``: placeholder until the report module lands (being written now)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("report", help="tables, CSV/JSON and plots of a sweep database")


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError
