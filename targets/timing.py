"""Interleaved timing: variants alternate within each round so machine noise hits all.

Times are per invocation; each sample averages enough back-to-back invocations to last
at least ``min_sample_s`` so short kernels are not dominated by timer and Python overhead.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Milliseconds per invocation over the samples."""

    median: float
    min: float
    max: float
    samples: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.min, "max": self.max, "samples": self.samples}


def time_interleaved(
    variants: Mapping[str, Callable[[], None]],
    repeats: int = 7,
    warmup: int = 1,
    min_sample_s: float = 0.05,
) -> dict[str, Timing]:
    """Time each variant ``repeats`` times, alternating variants (and their order) per round."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    names = list(variants)
    inner: dict[str, int] = {}
    for name in names:
        for _ in range(warmup):
            variants[name]()
        start = time.perf_counter()
        variants[name]()
        once = max(time.perf_counter() - start, 1e-6)
        inner[name] = max(1, math.ceil(min_sample_s / once))
    samples: dict[str, list[float]] = {n: [] for n in names}
    for round_index in range(repeats):
        order = names if round_index % 2 == 0 else list(reversed(names))
        for name in order:
            run, count = variants[name], inner[name]
            start = time.perf_counter()
            for _ in range(count):
                run()
            samples[name].append((time.perf_counter() - start) / count * 1e3)
    return {n: Timing(statistics.median(s), min(s), max(s), len(s)) for n, s in samples.items()}
