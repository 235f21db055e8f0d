"""Where a sweep's work runs: one executor interface, a local process pool by default.

An :class:`Executor` compiles candidates in parallel and benchmarks them one at a time;
the sweep never sees processes, only outcomes. A candidate that crashes its worker
(SIGSEGV in the compiler bindings, the runtime) or exceeds its time limit becomes a
``crashed`` / ``timeout`` outcome; the worker is replaced and the sweep goes on.

:class:`LocalExecutor` runs ``--jobs`` compile workers and one benchmark worker as
child processes of the sweep (see :mod:`.local_worker`). The Ray backend
(:mod:`.ray_executor`) implements the same interface on a cluster; :mod:`.executors`
makes either by name.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol

from tdsched.targets import make_target
from tdsched.targets.racing import RaceResult

from ..base.child_stderr import ChildStderr
from ..measure.status import Check, Outcome, Status
from .messages import (
    BenchJob,
    BenchOutcome,
    CompileJob,
    CompileOutcome,
    RaceJob,
    SweepContext,
    from_json,
    to_json,
)


@dataclass(frozen=True)
class Limits:
    """Per-candidate time limits, in seconds."""

    compile_s: float = 300.0
    run_s: float = 120.0


class Executor(Protocol):
    """Runs one sweep's compile and benchmark work."""

    def start(self, context: SweepContext) -> None:
        """Prepare workers for ``context`` (called again if the context changes)."""

    def compile(self, jobs: Sequence[CompileJob]) -> Iterator[CompileOutcome]:
        """Compile ``jobs`` in parallel; yield each outcome as it finishes."""

    def compile_default(self) -> CompileOutcome:
        """Build IREE's default of the workload into ``context.baseline_artifact``."""

    def bench(self, job: BenchJob) -> BenchOutcome:
        """Check and time one candidate, with nothing else running."""

    def time_baseline(self) -> dict[str, Any]:
        """IREE default's timing (median, min, max, samples in ms)."""

    def race(self, job: RaceJob) -> RaceResult:
        """Race candidates against each other and IREE default (see :mod:`.racing`)."""

    def close(self) -> None:
        """Stop every worker."""


class WorkerFailure(RuntimeError):
    """A worker died or ran out of time; ``status`` is ``crashed`` or ``timeout``."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status: Status = status


class WorkerError(RuntimeError):
    """A request raised in the worker (which lives on); the message is the exception's,
    ``traceback`` the worker's traceback for debugging."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message)
        self.traceback = traceback


def guarded_bench(key: str, measure: Callable[[], BenchOutcome]) -> BenchOutcome:
    """``measure()``; a dead or stuck worker, or an exception in it, fails only ``key``."""
    try:
        return measure()
    except WorkerFailure as exc:
        return BenchOutcome(key, Outcome(Check(exc.status, error=str(exc))))
    except WorkerError as exc:
        return BenchOutcome(key, Outcome(Check(Status.RUN_FAILED, error=str(exc))))


class WorkerProcess:
    """One worker child process, restarted after it dies or is killed for a timeout."""

    def __init__(self, context: SweepContext) -> None:
        self.context = context
        self._proc: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()
        # The worker's stderr, kept across restarts for as long as this object lives.
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115

    def _spawn(self) -> subprocess.Popen[str]:
        self._answers = queue.Queue()
        self._log.seek(0)
        self._log.truncate()
        stderr = ChildStderr(self._log, self._log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tdsched.schedules.sweep.local_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr.target,
            text=True,
            start_new_session=True,
        )
        stderr.follow(proc)
        threading.Thread(target=self._read, args=(proc, self._answers), daemon=True).start()
        self._proc = proc
        self._send({"op": "init", "context": to_json(self.context)}, 60.0)
        return proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], answers: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answers.put(line)
        answers.put(None)

    def request(self, message: dict[str, Any], timeout_s: float) -> Any:
        """Send ``message``; its result, or :class:`WorkerFailure` (worker replaced)."""
        if self._proc is None or self._proc.poll() is not None:
            self._spawn()
        return self._send(message, timeout_s)

    def _send(self, message: dict[str, Any], timeout_s: float) -> Any:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            line = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            self.stop()
            raise WorkerFailure(Status.TIMEOUT, f"no answer within {timeout_s:.0f} s") from None
        except BrokenPipeError:
            line = None
        if line is None:
            raise WorkerFailure(Status.CRASHED, self._death())
        answer = json.loads(line)
        if "error" in answer:
            raise WorkerError(answer["error"], answer.get("traceback", ""))
        return answer["result"]

    def _death(self) -> str:
        """Why the worker died, with the end of what it wrote to stderr."""
        assert self._proc is not None
        code = self._proc.wait()
        self._proc = None
        cause = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        self._log.seek(0)
        tail = [ln for ln in self._log.read().splitlines() if ln.strip()][-5:]
        return f"the worker process died ({cause})" + ("\n" + "\n".join(tail) if tail else "")

    def stop(self) -> None:
        """Kill the worker (and the compiler it may be running)."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._proc = None


class LocalExecutor:
    """``jobs`` compile workers and one benchmark worker on this machine."""

    def __init__(self, jobs: int | None = None, limits: Limits | None = None) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.limits = limits or Limits()
        self._compilers: queue.Queue[WorkerProcess] = queue.Queue()
        self._bench: WorkerProcess | None = None
        self._context: SweepContext | None = None

    def start(self, context: SweepContext) -> None:
        self.close()
        self._context = context
        self._compilers = queue.Queue()
        for _ in range(self.jobs):
            self._compilers.put(WorkerProcess(context))
        self._bench = WorkerProcess(context)

    def _on_compiler(self, key: str, message: dict[str, Any]) -> CompileOutcome:
        """Run a compile request on a free compile worker; failures become outcomes."""
        worker = self._compilers.get()
        try:
            answer = worker.request(message, self.limits.compile_s)
            return from_json(CompileOutcome, answer)
        except WorkerFailure as exc:
            return CompileOutcome(key, exc.status, self.limits.compile_s, str(exc))
        except WorkerError as exc:
            return CompileOutcome(key, Status.COMPILE_FAILED, 0.0, str(exc))
        finally:
            self._compilers.put(worker)

    def _compile_one(self, job: CompileJob) -> CompileOutcome:
        return self._on_compiler(job.key, {"op": "compile", "job": to_json(job)})

    def compile(self, jobs: Sequence[CompileJob]) -> Iterator[CompileOutcome]:
        context = self._context
        if (
            self._bench is not None
            and context is not None
            and make_target(context.target).open_device_keeps_cpu_busy
        ):
            # The benchmark worker has opened the device and would starve the compiles;
            # it is started again when next needed.
            self._bench.stop()
        with ThreadPoolExecutor(self.jobs) as pool:
            futures = [pool.submit(self._compile_one, job) for job in jobs]
            for future in as_completed(futures):
                yield future.result()

    def compile_default(self) -> CompileOutcome:
        return self._on_compiler("baseline", {"op": "compile_default"})

    def _bench_worker(self) -> WorkerProcess:
        assert self._bench is not None, "start() first"
        return self._bench

    def bench(self, job: BenchJob) -> BenchOutcome:
        message = {"op": "bench", "job": to_json(job)}
        return guarded_bench(
            job.key,
            lambda: from_json(
                BenchOutcome, self._bench_worker().request(message, self.limits.run_s)
            ),
        )

    def time_baseline(self) -> dict[str, Any]:
        result: dict[str, Any] = self._bench_worker().request({"op": "baseline"}, self.limits.run_s)
        return result

    def race(self, job: RaceJob) -> RaceResult:
        limit = self.limits.run_s * max(1, len(job.artifacts)) + job.settings["time_cap_s"]
        result = self._bench_worker().request({"op": "race", "job": to_json(job)}, limit)
        return RaceResult.from_dict(result)

    def close(self) -> None:
        while not self._compilers.empty():
            self._compilers.get().stop()
        if self._bench is not None:
            self._bench.stop()
            self._bench = None
