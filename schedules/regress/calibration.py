"""The calibration kernel: a fixed workload timed before and after each measurement.

Its time does not depend on any recipe, so a change between the two timings means the
machine itself changed speed (another job started, the CPU throttled) while the recipe
was being measured; such a measurement is inconclusive, not a regression. It runs on
the entry's own device (a GPU's contention shows on Vulkan, not on the CPU).

Before the first ("before") timing the kernel is warmed up until it runs at a steady
speed (:func:`warm_up`): it is timed again and again until two consecutive medians agree
within :data:`WARMUP_AGREEMENT`, for at most :data:`WARMUP_BUDGET_S` seconds or
:data:`WARMUP_MAX_ATTEMPTS` timings. On a loaded 2-core machine one warm-up was not
enough: the "before" timing still ran far slower than "after" (20.3 then 1.6 ms, 4.9 then
1.9 ms), which made the measurement inconclusive although nothing changed during it. The
rule looks only at the kernel's own times, so it is the same on every target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tdsched.recipes.workloads import generate
from tdsched.targets import Target
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.timing import Timing, time_interleaved
from tdsched.targets.workload import random_inputs

from ..base.files import write_atomically
from ..compile.pipeline import compile_default_workload

CALIBRATION_ARGS: dict[str, int | str] = {"M": 256, "N": 256, "K": 256, "dtype": "f32"}
"""A 256³ f32 matmul under IREE's default pipeline: about a millisecond on a CPU."""
ROUNDS = 5
WARMUP_AGREEMENT = 0.10
"""Warm-up ends once two consecutive medians differ by at most this fraction."""
WARMUP_BUDGET_S = 2.0
"""Warm-up stops after this many seconds even if the medians still disagree."""
WARMUP_MAX_ATTEMPTS = 10
"""... or after this many timings."""


def settled(previous: float, latest: float, agreement: float = WARMUP_AGREEMENT) -> bool:
    """Whether two consecutive medians agree: their difference is at most ``agreement``
    of the smaller one (so the rule is the same whichever of the two is faster)."""
    return abs(latest - previous) <= agreement * min(previous, latest)


def warm_up(
    time_once: Callable[[], Timing],
    *,
    agreement: float = WARMUP_AGREEMENT,
    budget_s: float = WARMUP_BUDGET_S,
    max_attempts: int = WARMUP_MAX_ATTEMPTS,
    clock: Callable[[], float] = time.perf_counter,
) -> list[Timing]:
    """Call ``time_once`` until the last two medians are :func:`settled`: at least twice
    (unless the first call alone used up ``budget_s``), at most ``max_attempts`` times,
    and no more once ``budget_s`` seconds have passed (checked after each call). The
    timings taken, in order."""
    start = clock()
    timings = [time_once()]
    while len(timings) < max_attempts and clock() - start < budget_s:
        timings.append(time_once())
        if settled(timings[-2].median, timings[-1].median, agreement):
            break
    return timings


@dataclass(frozen=True)
class CalibrationDrift:
    before: Timing
    after: Timing
    warmup_ms: tuple[float, ...] = ()
    """The medians of the warm-up timings (:func:`warm_up`), taken once per entry before
    its first attempt's ``before``."""

    @property
    def drift(self) -> float:
        """Relative change of the calibration kernel's median time (after vs before)."""
        return self.after.median / self.before.median - 1.0

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CalibrationDrift:
        """The drift :meth:`as_dict` wrote."""
        warmup = tuple(data.get("warmup_ms", ()))
        return CalibrationDrift(Timing(**data["before_ms"]), Timing(**data["after_ms"]), warmup)

    def as_dict(self) -> dict[str, object]:
        return {
            "before_ms": self.before.as_dict(),
            "after_ms": self.after.as_dict(),
            "drift": self.drift,
            "warmup_ms": list(self.warmup_ms),
        }


class Calibration:
    """The calibration kernel loaded on ``target``'s device.

    Its build is cached under ``cache_dir`` (one per target and IREE version: callers
    pass a directory private to the run), written atomically so concurrent runs that
    share a directory never read half a file.
    """

    def __init__(self, target: Target, cache_dir: Path) -> None:
        workload = generate("matmul", dict(CALIBRATION_ARGS))
        cache_dir.mkdir(parents=True, exist_ok=True)
        cached = cache_dir / f"calibration.{target.name}.vmfb"
        if not cached.is_file():
            build_dir = cache_dir / f"build-{target.name}"
            build_dir.mkdir(exist_ok=True)
            built = compile_default_workload(workload, target, build_dir)
            write_atomically(cached, built.read_bytes())
        self._module = LoadedModule(cached, target.driver, workload.function)
        self._run = self._module.runner(random_inputs(workload, 0))
        # The first rounds run up to 25% slow on an idle x86 machine, and several times
        # slower on a loaded one: time until the kernel's speed settles.
        self.warmup = warm_up(self.time)

    def time(self) -> Timing:
        """The kernel's time per call over :data:`ROUNDS` rounds."""
        return time_interleaved({"calibration": self._run}, repeats=ROUNDS)["calibration"]
