"""The worker process of the local executor: ``python -m tdsched.schedules.sweep.local_worker``.

Reads one JSON request per line on stdin and answers one JSON line each. The protocol
uses a private copy of the original stdout; file descriptor 1 is pointed at stderr so
nothing a library prints can corrupt it. Requests:

* ``{"op": "init", "context": SweepContext}``: first, once;
* ``{"op": "compile", "job": CompileJob}`` → CompileOutcome;
* ``{"op": "compile_default"}`` → CompileOutcome (IREE default into the context's path);
* ``{"op": "bench", "job": BenchJob}`` → BenchOutcome;
* ``{"op": "baseline"}`` → IREE default's timing;
* ``{"op": "race", "job": RaceJob}`` → RaceResult (as a dict).

An answer is ``{"result": ...}``, or ``{"error": "...", "traceback": "..."}`` for an
unexpected exception.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import Any

from .compile_and_bench import Bench, compile_candidate, compile_default
from .messages import BenchJob, CompileJob, RaceJob, SweepContext, from_json, to_json


class _Worker:
    def __init__(self) -> None:
        self.context: SweepContext | None = None
        self.bench: Bench | None = None

    def handle(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "init":
            self.context = from_json(SweepContext, request["context"])
            self.bench = None
            return None
        context = self.context
        if context is None:
            raise RuntimeError("the first request must be 'init'")
        if op == "compile":
            return to_json(compile_candidate(context, from_json(CompileJob, request["job"])))
        if op == "compile_default":
            return to_json(compile_default(context, "baseline"))
        if self.bench is None:
            self.bench = Bench(context)
        if op == "bench":
            return to_json(self.bench.run(from_json(BenchJob, request["job"])))
        if op == "baseline":
            return self.bench.time_baseline()
        if op == "race":
            return self.bench.race(from_json(RaceJob, request["job"])).as_dict()
        raise RuntimeError(f"unknown request {op!r}")


def _exit_with_parent() -> None:
    """End this worker when the sweep that started it dies (even by ``kill -9``): a
    worker stuck in a hanging candidate would otherwise never read end-of-input."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    """Serve requests until stdin closes or the sweep process dies."""
    _exit_with_parent()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = _Worker()
    for line in sys.stdin:
        try:
            answer = {"result": worker.handle(json.loads(line))}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        protocol.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
