"""One default x86 thread count for run, sweep, regress and peak, named in every table;
the CPU runtime driver and calling-thread policy it implies."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tdsched.schedules.cli.main import make_parser
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.measure.status import Status
from tdsched.schedules.regress.baseline_file import Entry, Settings
from tdsched.schedules.regress.measure import Measurement
from tdsched.schedules.regress.output import table
from tdsched.schedules.regress.runner import EntryResult
from tdsched.schedules.regress.verdict import Verdict
from tdsched.schedules.sweep.database import ResultsDB
from tdsched.schedules.sweep.runner import SweepOptions, recorded_options
from tdsched.targets.runtime import cpu_driver, defer_caller_to_workers
from tdsched.targets.target import DEFAULT_THREADS, run_conditions


def _threads_default(parser: argparse.ArgumentParser, command: str) -> object:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command].get_default("threads")


def test_every_command_defaults_to_the_same_thread_count() -> None:
    parser = make_parser()
    defaults = {command: _threads_default(parser, command) for command in ("run", "sweep", "peak")}
    assert defaults == dict.fromkeys(defaults, DEFAULT_THREADS)
    assert Settings().threads == DEFAULT_THREADS  # regress and its pytest plugin
    assert SweepOptions().build.threads == DEFAULT_THREADS


def test_run_conditions_name_threads_on_x86_only() -> None:
    assert run_conditions("x86", 1) == "x86, 1 thread"
    assert run_conditions("x86", 2) == "x86, 2 threads"
    assert run_conditions("vulkan", None) == run_conditions("vulkan", 2) == "vulkan"


def _result(target: str, threads: int) -> EntryResult:
    entry = Entry(recipe="matmul_x86", target=target, params={"M": 64})
    measurement = Measurement(Status.ERROR, error="boom", target=target)
    return EntryResult(entry, Settings(threads=threads), measurement, Verdict("error", "boom"))


def test_the_regress_table_names_the_threads_each_entry_ran_with() -> None:
    text = table([_result("x86", 1), _result("vulkan", 3)])
    rows = [line for line in text.splitlines() if line.startswith("ERROR ")]
    assert "x86, 1 thread " in rows[0]
    assert "vulkan" in rows[1] and "thread" not in rows[1]


def test_a_recorded_sweep_names_its_threads(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path / "s.db")
    common = {"recipe": "r", "source": None, "strategy": "grid", "space": {}}
    x86 = db.start_sweep(target="x86", signature="a", options={"threads": 1}, **common)
    gpu = db.start_sweep(target="vulkan", signature="b", options={"threads": 2}, **common)
    assert db.sweep(x86).conditions == "x86, 1 thread"
    assert db.sweep(gpu).conditions == "vulkan"


def test_one_cpu_thread_runs_inline_on_local_sync() -> None:
    """One thread runs on local-sync (no worker hand-off per call: benchmarks/call_overhead.py);
    more threads, no count, and GPU drivers keep the target's driver."""
    assert cpu_driver("local-task", 1) == "local-sync"
    assert cpu_driver("local-task", 2) == "local-task"
    assert cpu_driver("local-task", None) == "local-task"
    assert cpu_driver("vulkan", 1) == "vulkan"


_POLICY_AFTER_PREPARE = """
import os
from tdsched.schedules.measure.evaluation import prepare_device
from tdsched.targets.target import make_target
prepare_device(make_target("x86"), {threads})
print(os.sched_getscheduler(0) == os.SCHED_BATCH)
"""


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")
@pytest.mark.parametrize(("threads", "batch"), [(1, False), (2, True)])
@pytest.mark.process
def test_workers_are_not_preempted_by_the_calling_thread(threads: int, batch: bool) -> None:
    """On local-task (2+ threads) the calling thread waits under SCHED_BATCH, so waking it
    does not take the core from the worker that woke it (benchmarks/caller_policy.py);
    local-sync's calling thread does the work itself and keeps its policy. Each in a fresh
    process: the thread count is fixed once per process."""
    code = _POLICY_AFTER_PREPARE.format(threads=threads)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == str(batch)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")
def test_the_caller_policy_is_the_calling_threads_alone() -> None:
    seen: list[int] = []
    before = os.sched_getscheduler(0)

    def in_a_thread() -> None:
        assert defer_caller_to_workers()
        seen.append(os.sched_getscheduler(0))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == [os.SCHED_BATCH]
    assert os.sched_getscheduler(0) == before


def test_a_sweep_records_its_build_settings_where_reports_read_them() -> None:
    # report and the roofline read threads and cpu at the top of a sweep's options, as
    # every database since the first has them
    build = BuildTarget("x86", cpu="haswell", cpu_features="+fma", threads=1)
    recorded = recorded_options(SweepOptions(build=build))
    assert (recorded["target"], recorded["cpu"], recorded["threads"]) == ("x86", "haswell", 1)
    assert recorded["cpu_features"] == "+fma" and "build" not in recorded
