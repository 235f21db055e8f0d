"""The calibration kernel: a fixed workload timed before and after each measurement.

Its time does not depend on any recipe, so a change between the two timings means the
machine itself changed speed (another job started, the CPU throttled) while the recipe
was being measured; such a measurement is inconclusive, not a regression. It runs on
the entry's own device (a GPU's contention shows on Vulkan, not on the CPU).
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class CalibrationDrift:
    before: Timing
    after: Timing

    @property
    def drift(self) -> float:
        """Relative change of the calibration kernel's median time (after vs before)."""
        return self.after.median / self.before.median - 1.0

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CalibrationDrift:
        """The drift :meth:`as_dict` wrote."""
        return CalibrationDrift(Timing(**data["before_ms"]), Timing(**data["after_ms"]))

    def as_dict(self) -> dict[str, object]:
        return {
            "before_ms": self.before.as_dict(),
            "after_ms": self.after.as_dict(),
            "drift": self.drift,
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
        self.time()  # warm-up: the first rounds run up to 25% slow (measured on x86)

    def time(self) -> Timing:
        return time_interleaved({"calibration": self._run}, repeats=ROUNDS)["calibration"]
