"""Interleaved timing: variants alternate within each round so machine noise hits all.

Times are per invocation; each sample averages enough back-to-back invocations to last
at least ``min_sample_s`` so short kernels are not dominated by timer and Python overhead.
:func:`time_interleaved` runs a fixed number of rounds (``tdsched run``, sweeps);
:func:`time_ratio` runs rounds until the ratio of two variants is known well enough to
decide against a threshold (``tdsched regress``). Both drive one :class:`RoundTimer`.

A speedup is always :func:`speedup`: the median of per-round ratios (each round's two
samples were taken moments apart, so drift in the machine's speed cancels) with its
distribution-free interval. Its policies differ only in how many rounds they take:
a fixed number (``run``, a sweep's screening), a race that drops the slow
(:mod:`tdsched.targets.racing`), or until decided (:func:`time_ratio`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

MIN_SAMPLE_S = 0.05
"""Seconds a timed sample lasts at least: that many back-to-back calls, averaged."""


@dataclass(frozen=True)
class Placements:
    """One variant in several placements in memory: the same call, each with its own
    copy of the module and of its inputs (see
    :meth:`~tdsched.targets.runtime.LoadedModule.timing_runner`). A kernel's speed can
    depend on where its buffers land (a convolution measured at 1.05 or 1.40 ms per call,
    the mode fixed for the life of one load), so timing one load measures that load's
    luck. A :class:`RoundTimer` sample of the variant runs every placement in turn, an
    equal block of back-to-back calls on each (the caches as warm as a repeated call
    finds them after its first), so each sample is the mean time per call over the
    placements, and so is the median of the samples."""

    calls: tuple[Callable[[], None], ...]

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("a variant needs at least one placement")


Variant = Callable[[], None] | Placements
"""What :class:`RoundTimer` times: one call, or a call in several placements."""


@dataclass(frozen=True)
class Timing:
    """Milliseconds per invocation over the samples."""

    median: float
    min: float
    max: float
    samples: int

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.min, "max": self.max, "samples": self.samples}

    @staticmethod
    def of(samples: list[float]) -> Timing:
        return Timing(statistics.median(samples), min(samples), max(samples), len(samples))


def round_order(names: Sequence[str], index: int) -> list[str]:
    """The order variants run in round ``index``: forward in even rounds, reversed in odd
    ones, so that no variant always runs right after the same neighbour."""
    return list(names) if index % 2 == 0 else list(reversed(names))


class RoundTimer:
    """Times ``variants`` round by round, every variant once per round, in alternating
    order (even rounds forward, odd rounds reversed).

    On construction each variant runs ``warmup`` times (in each of its placements) and
    once more to size its sample: a sample is ``ceil(min_sample_s / one call)``
    back-to-back calls, fixed from then on. A variant given as :class:`Placements` of
    ``k`` calls runs ``ceil(min_sample_s / k / one call)`` back-to-back calls on each
    placement in turn per sample (the same order in every round).
    """

    def __init__(
        self,
        variants: Mapping[str, Variant],
        warmup: int = 1,
        min_sample_s: float = MIN_SAMPLE_S,
    ) -> None:
        self.variants = {
            name: v.calls if isinstance(v, Placements) else (v,) for name, v in variants.items()
        }
        self.names = list(variants)
        self.samples: dict[str, list[float]] = {n: [] for n in self.names}
        self._inner: dict[str, int] = {}
        self._rounds = 0
        for name, calls in self.variants.items():
            for run in calls:
                for _ in range(warmup):
                    run()
            start = time.perf_counter()
            calls[0]()
            once = max(time.perf_counter() - start, 1e-6)
            self._inner[name] = max(1, math.ceil(min_sample_s / len(calls) / once))

    @property
    def rounds(self) -> int:
        return self._rounds

    def round(self) -> dict[str, float]:
        """Run one round; each variant's milliseconds per call in it (also kept in
        ``samples``)."""
        order = round_order(self.names, self.rounds)
        result: dict[str, float] = {}
        for name in order:
            calls, count = self.variants[name], self._inner[name]
            start = time.perf_counter()
            for run in calls:
                for _ in range(count):
                    run()
            result[name] = (time.perf_counter() - start) / (count * len(calls)) * 1e3
            self.samples[name].append(result[name])
        self._rounds += 1
        return result

    def run(self, rounds: int) -> None:
        """Run ``rounds`` rounds."""
        for _ in range(rounds):
            self.round()

    def drop(self, name: str) -> None:
        """Stop timing ``name`` from the next round on (its samples are kept)."""
        self.names.remove(name)

    def timings(self) -> dict[str, Timing]:
        return {n: Timing.of(s) for n, s in self.samples.items()}


def speedup(
    samples: Mapping[str, Sequence[float]], of: str, over: str, confidence: float = 0.95
) -> Interval:
    """The speedup of variant ``of`` over ``over`` (above 1: ``of`` is faster), from the
    per-round times ``samples`` of a :class:`RoundTimer` (or the lists it wrote): the
    median of the per-round ratios ``over / of`` over the rounds both ran, and its
    ``confidence`` interval (:func:`median_interval`)."""
    return Interval.of_ratios(samples[over], samples[of], confidence)


def time_rounds(
    variants: Mapping[str, Variant],
    repeats: int = 7,
    warmup: int = 1,
    min_sample_s: float = MIN_SAMPLE_S,
) -> dict[str, list[float]]:
    """Each variant's milliseconds per call, round by round: ``repeats`` rounds,
    alternating variants (and their order) per round (the samples :func:`speedup`
    reads)."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    timer = RoundTimer(variants, warmup, min_sample_s)
    timer.run(repeats)
    return timer.samples


def time_interleaved(
    variants: Mapping[str, Variant],
    repeats: int = 7,
    warmup: int = 1,
    min_sample_s: float = MIN_SAMPLE_S,
) -> dict[str, Timing]:
    """Time each variant ``repeats`` times, alternating variants (and their order) per round."""
    samples = time_rounds(variants, repeats, warmup, min_sample_s)
    return {name: Timing.of(times) for name, times in samples.items()}


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of ``values``.

    The order statistics ``x(k) <= median <= x(n+1-k)`` with the largest ``k`` for which
    ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``; with too few values for that
    confidence the interval is the whole range.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values")
    tail = (1.0 - confidence) / 2.0
    k, below = 0, 0.0
    while k < n // 2:
        below += math.comb(n, k) / 2.0**n  # P(Binomial(n, 1/2) == k)
        if below > tail:
            break
        k += 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


@dataclass(frozen=True)
class Interval:
    """A median and its distribution-free confidence interval (:func:`median_interval`)."""

    median: float
    low: float
    high: float

    @staticmethod
    def of(values: Sequence[float], confidence: float) -> Interval:
        low, high = median_interval(list(values), confidence)
        return Interval(statistics.median(values), low, high)

    @staticmethod
    def of_ratios(
        numerators: Sequence[float], denominators: Sequence[float], confidence: float
    ) -> Interval:
        """Of the per-round ratios ``numerator / denominator`` over the rounds both have
        (a variant dropped from a :class:`RoundTimer` has fewer)."""
        pairs = zip(numerators, denominators, strict=False)
        return Interval.of([n / d for n, d in pairs], confidence)

    def as_list(self) -> list[float]:
        return [round(self.median, 4), round(self.low, 4), round(self.high, 4)]

    @staticmethod
    def from_list(values: Sequence[float]) -> Interval:
        median, low, high = values
        return Interval(median, low, high)


def relative_half_width(median: float, low: float, high: float) -> float:
    """An interval's larger half around ``median``, as a fraction of it."""
    return max(median - low, high - median) / median


@dataclass(frozen=True)
class Ratio:
    """``denominator / numerator`` time per round (a speedup of ``numerator`` over
    ``denominator``): the median of the per-round ratios and its confidence interval."""

    median: float
    low: float
    high: float
    rounds: int
    seconds: float
    stopped: Literal["decided", "precise", "time_cap", "max_rounds"]
    times: dict[str, Timing]

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Ratio:
        """The ratio :meth:`as_dict` wrote."""
        times = {n: Timing(**t) for n, t in data["times_ms"].items()}
        fields = ("median", "low", "high", "rounds", "seconds", "stopped")
        return Ratio(**{k: data[k] for k in fields}, times=times)

    def as_dict(self) -> dict[str, object]:
        return {
            "median": self.median,
            "low": self.low,
            "high": self.high,
            "rounds": self.rounds,
            "seconds": self.seconds,
            "stopped": self.stopped,
            "times_ms": {n: t.as_dict() for n, t in self.times.items()},
        }


def time_ratio(
    numerator: Variant,
    denominator: Variant,
    *,
    precision: float,
    threshold: float | None = None,
    confidence: float = 0.95,
    min_rounds: int = 8,
    max_rounds: int = 400,
    time_cap_s: float = 60.0,
    min_sample_s: float = MIN_SAMPLE_S,
    labels: tuple[str, str] = ("numerator", "denominator"),
) -> Ratio:
    """Time two variants interleaved until their ratio is known well enough.

    Each round times both; its ratio ``denominator / numerator`` pairs two samples taken
    moments apart, so drift in the machine's speed cancels. After ``min_rounds`` rounds,
    stop when the median's confidence interval lies within ``precision`` of the median
    (relative), or (given a ``threshold``) lies wholly above or below it; otherwise go
    on until ``time_cap_s`` (counted from the start, warm-up included) or ``max_rounds``.
    ``labels`` name the two variants in :attr:`Ratio.times`.
    """
    start = time.perf_counter()
    top, bottom = labels
    timer = RoundTimer({top: numerator, bottom: denominator}, 1, min_sample_s)
    while True:
        timer.round()
        rounds = timer.rounds
        median, low, high = dataclasses.astuple(speedup(timer.samples, top, bottom, confidence))
        elapsed = time.perf_counter() - start
        stopped: Literal["decided", "precise", "time_cap", "max_rounds"] | None = None
        if rounds >= min_rounds:
            if relative_half_width(median, low, high) <= precision:
                stopped = "precise"
            elif threshold is not None and (low >= threshold or high < threshold):
                stopped = "decided"
            elif elapsed >= time_cap_s:
                stopped = "time_cap"
            elif rounds >= max_rounds:
                stopped = "max_rounds"
        if stopped is not None:
            return Ratio(median, low, high, rounds, elapsed, stopped, timer.timings())
