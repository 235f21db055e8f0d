"""The ``tdsched`` command line run in the test's process, for tests of its errors: an
uncaught exception fails the test, as a traceback would. conftest.py registers this
module, so that every test can request the ``tdsched`` fixture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from tdsched.schedules.cli.main import main


@dataclass
class Outcome:
    returncode: int
    stderr: str


@pytest.fixture
def tdsched(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """The command line, in this process; argparse's own errors exit 2."""

    def call(*args: str) -> Outcome:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        return Outcome(code, capsys.readouterr().err)

    return call
