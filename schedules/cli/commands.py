"""The table of ``tdsched`` commands: each command's name and the module that implements
it, imported only when the command runs (or when ``--help`` lists them all), so that
``tdsched --version`` and a light command do not load the compiler's bindings for the
others."""

from __future__ import annotations

import argparse
import importlib
from typing import Any, Protocol, cast

REGRESS_HISTORY = "regress-history"
"""``regress history``'s parser name among the subcommands (hidden from ``tdsched
--help``): ``regress``'s own first argument is a baseline file, so it cannot hold
subcommands, and ``main`` routes the two words to this one."""


class Command(Protocol):
    """What each command's module offers (see :data:`COMMANDS`)."""

    def add_parser(self, sub: Any) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: dict[str, str] = {
    "show": "show_command",
    "apply": "apply_command",
    "explain": "explain_command",
    "compile": "compile_command",
    "run": "run_command",
    "sweep": "sweep_command",
    "report": "report_command",
    "regress": "regress_command",
    REGRESS_HISTORY: "regress_history_command",
    "lower": "lower_command",
    "schema": "schema_command",
    "list": "list_command",
    "peak": "peak_command",
    "tasks": "tasks_command",
    "tune": "tune_command",
    "check": "check_command",
}
"""Every command's module in this package, in the order ``tdsched --help`` lists them.
Each has ``add_parser(sub)``, which adds its parser to argparse's subparsers, and
``run(args)``, which turns the parsed Namespace into the typed request of the layer
below, runs it and returns the exit status."""


def command_module(name: str) -> Command:
    """The module of command ``name`` (a key of :data:`COMMANDS`), imported now."""
    return cast(Command, importlib.import_module(f"{__package__}.{COMMANDS[name]}"))
