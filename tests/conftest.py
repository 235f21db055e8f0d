"""Shared fixtures, and the two test tiers.

A test that compiles with IREE (iree-compile, in process or through the ``tdsched`` command
line, a sweep or ``tdsched regress``) or runs a compiled module requests the ``iree`` fixture:
directly, through another fixture (``vulkan`` and ``target`` request it), or with
``@pytest.mark.usefixtures("iree")``. Collection marks it ``integration`` (and ``vulkan`` when
it requests ``vulkan``), so ``pytest -m "not integration"`` is the fast tier. Parsing and
rewriting MLIR in process with the bindings is not integration.

A test that does not request ``iree`` cannot reach IREE by accident: while it runs,
``iree-compile`` (found through ``IREE_TOOL_PATH``, inherited by child processes) is a stub
that refuses, and loading modules or runtime devices raises; either fails the test with
"this test uses IREE: request the `iree` fixture".

A fast-tier test that starts a child process (the command line run as a user runs it, an
isolated child, a wheel build) is marked ``process``: ``pytest -m "not integration and not
process"`` is then the fast tier proper, which runs in parallel (``-n 2``) in about a minute.
A test that starts a process without the marker fails with "this test starts child
processes: mark it ``@pytest.mark.process``", so the fast tier stays fast.

Vulkan tests skip without a device unless TDSCHED_REQUIRE_VULKAN=1 (set by CI), where a
missing device fails them instead. See docs/testing.md.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from tdsched.recipes import RECIPES_DIR
from tdsched.targets import compile_cache, compiler, runtime

pytest_plugins = ["cli_inprocess"]  # the `tdsched` fixture: the command line in process

REQUIRE_VULKAN = os.environ.get("TDSCHED_REQUIRE_VULKAN") == "1"
# The machine's peak (tdsched run, tdsched peak) is measured once per test session into a
# cache of its own, never read from (or written to) the user's.
# It is removed when the session's process ends.
CACHE_DIR = tempfile.mkdtemp(prefix="tdsched-test-cache-")
os.environ["TDSCHED_CACHE_DIR"] = CACHE_DIR
atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)
# Identical iree-compile commands (same input and library contents, flags, IREE) compile
# once per session: a compile cache (tdsched.targets.compile_cache) that every test and
# child process shares (pytest-xdist workers inherit it from the controller, which loads
# this file first). One the user set is kept; set empty, nothing is cached.
if compile_cache.ENV not in os.environ:
    COMPILE_CACHE = tempfile.mkdtemp(prefix="tdsched-test-compile-cache-")
    os.environ[compile_cache.ENV] = COMPILE_CACHE
    atexit.register(shutil.rmtree, COMPILE_CACHE, ignore_errors=True)


FIRST = ("test_sweep_ray.py", "test_regress.py", "test_run_profile.py")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the markers added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by the fixtures they request, then run the Ray, the perf regression and
    the per-dispatch profile tests first. Once a process opens a Vulkan device on Mesa's lavapipe it keeps two cores
    busy for the rest of its life (measured: 200% CPU while idle): Ray runs its workers
    niced, so after any in-process Vulkan test their compiles crawl past the Ray tests' time
    limits, and the regression tests' timing would share the machine with it (the profile
    tests' too: the host thread that submits each call is starved, measured: calls 2x the
    time of their dispatches)."""
    for item in items:
        if "iree" in item.fixturenames:
            item.add_marker(pytest.mark.integration)
        elif item.get_closest_marker("integration") is not None:
            raise pytest.UsageError(
                f"{item.nodeid}: the integration marker comes from the `iree` fixture; "
                "request the fixture instead of marking the test"
            )
        if "vulkan" in item.fixturenames:
            item.add_marker(pytest.mark.vulkan)
    items.sort(
        key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else len(FIRST)
    )


@pytest.fixture(scope="session")
def iree() -> str:
    """The test compiles with IREE or runs compiled modules: it is an integration test.
    Returns the path of iree-compile."""
    from iree.compiler.tools.binaries import find_tool

    return str(find_tool("iree-compile"))


@pytest.fixture(scope="session")
def vulkan(iree: str) -> None:
    """Require a Vulkan device: skip without one, or fail when CI demands Vulkan.

    The device is probed in a child process: opened here, lavapipe would keep two cores
    busy for the rest of the test session (see :func:`pytest_collection_modifyitems`)."""
    probe = "import sys; from tdsched.targets.runtime import driver_available as d; "
    probe += "sys.exit(0 if d('vulkan') else 1)"
    if subprocess.run([sys.executable, "-c", probe], check=False).returncode == 0:
        return
    message = "no Vulkan device (install mesa-vulkan-drivers for lavapipe)"
    if REQUIRE_VULKAN:
        pytest.fail(message + "; TDSCHED_REQUIRE_VULKAN=1 makes this a failure")
    pytest.skip(message)


@pytest.fixture(params=["x86", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def target(request: pytest.FixtureRequest, iree: str) -> str:
    """Run the test once per target, x86 and Vulkan (which requires a Vulkan device)."""
    if request.param == "vulkan":
        request.getfixturevalue("vulkan")
    return str(request.param)


@pytest.fixture
def no_compile_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every build in the test (and its child processes) runs iree-compile: for a test that
    compares a module with one rebuilt by its printed command, since a cached module names
    the input file of the build that filled the cache (see targets/compile_cache.py)."""
    monkeypatch.delenv(compile_cache.ENV, raising=False)


@pytest.fixture(scope="session")
def iree_opt() -> str:
    tool = shutil.which("iree-opt") or str(Path(os.sys.executable).parent / "iree-opt")
    assert Path(tool).exists(), "iree-opt not found next to the Python interpreter"
    return tool


@pytest.fixture(scope="session")
def recipes_dir() -> Path:
    return RECIPES_DIR


# ---- the guard: tests that do not request `iree` cannot reach it ----------------------------

GUARD_MESSAGE = (
    "this test uses IREE: request the `iree` fixture (as an argument, through another "
    "fixture, or with @pytest.mark.usefixtures('iree')) so that it is marked integration"
)
PROCESS_MESSAGE = (
    "this test starts child processes: mark it @pytest.mark.process (the fast tier runs "
    "without them; see docs/testing.md)"
)
_GUARD_LOG = "TDSCHED_TEST_IREE_GUARD_LOG"
_STUB = f"""#!/bin/sh
# iree-compile while a test that did not request the `iree` fixture runs (tests/conftest.py)
echo "iree-compile in a child process" >> "${_GUARD_LOG}"
cat >&2 <<'END'
error: {GUARD_MESSAGE}
END
exit 70
"""


class IreeGuardError(RuntimeError):
    """A test that did not request the `iree` fixture reached IREE."""


class _Guard:
    def __init__(self, stub_dir: Path) -> None:
        self.stub_dir = stub_dir
        self.log = stub_dir / "uses.log"
        self.uses: list[str] = []
        self.processes: list[str] = []

    def install(self, mp: pytest.MonkeyPatch, item: pytest.Item) -> None:
        self.log.write_text("")
        self.uses.clear()
        self.processes.clear()
        if item.get_closest_marker("process") is None:
            started = subprocess.Popen.__init__

            def record(popen: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
                self.processes.append(str(args)[:120])
                started(popen, args, *rest, **kw)

            mp.setattr(subprocess.Popen, "__init__", record)
        tool_path = os.environ.get("IREE_TOOL_PATH")
        mp.setenv("IREE_TOOL_PATH", os.pathsep.join(filter(None, [str(self.stub_dir), tool_path])))
        mp.setenv(_GUARD_LOG, str(self.log))
        mp.delenv(compile_cache.ENV, raising=False)  # a cached build would hide a compile
        mp.setattr(compiler, "_invoke", self._refuse("iree-compile"))
        mp.setattr(runtime, "_config", self._refuse("an IREE runtime device"))
        mp.setattr(runtime.LoadedModule, "__init__", self._refuse("an IREE runtime module"))

    def _refuse(self, what: str) -> Callable[..., NoReturn]:
        def refuse(*args: Any, **kwargs: Any) -> NoReturn:
            self.uses.append(what)
            raise IreeGuardError(f"{GUARD_MESSAGE} (it reached {what})")

        return refuse

    def check(self) -> None:
        """Fail the test if it reached IREE, even where the error was caught."""
        children = self.log.read_text().splitlines() if self.log.exists() else []
        uses = self.uses + children
        self.uses.clear()
        self.log.write_text("")
        if uses:
            message = f"{GUARD_MESSAGE}; it reached {', '.join(dict.fromkeys(uses))}"
            raise pytest.fail.Exception(message, pytrace=False) from None
        if self.processes:
            started, self.processes = self.processes[0], []
            raise pytest.fail.Exception(
                f"{PROCESS_MESSAGE}; it started {started}", pytrace=False
            ) from None


_guard: _Guard | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _guard
    stub_dir = Path(tempfile.mkdtemp(prefix="tdsched-iree-guard-"))
    stub = stub_dir / "iree-compile"
    stub.write_text(_STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    _guard = _Guard(stub_dir)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _guard is not None:
        shutil.rmtree(_guard.stub_dir, ignore_errors=True)


def _guarded(item: pytest.Item) -> _Guard | None:
    return _guard if _guard is not None and "iree" not in item.fixturenames else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    guard = _guarded(item)
    if guard is None:
        return (yield)
    with pytest.MonkeyPatch.context() as mp:
        guard.install(mp, item)
        return (yield)


def _checked(item: pytest.Item) -> Generator[None]:
    """Run the wrapped phase, then fail the test if it reached IREE unguarded."""
    guard = _guarded(item)
    try:
        return (yield)
    finally:
        if guard is not None:
            guard.check()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    return (yield from _checked(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    try:
        return (yield from _checked(item))
    finally:
        if item.get_closest_marker("vulkan") is not None:
            _release_vulkan()


def _release_vulkan() -> None:
    """Close the Vulkan device a test opened in this process, once its modules are gone:
    an open lavapipe device spins two cores while idle, which slowed every later test
    (compiles, timing) in the session (:func:`tdsched.targets.runtime.release_device`).
    A module-scoped fixture's modules keep theirs open until the fixture ends."""
    runtime.release_device("vulkan")
    gc.collect()
