"""Change points in a gate's history: where an entry's speedup stepped, and by how much.

A series is one entry's recorded speedup medians on one machine, oldest first. Its
change points are found in two stages:

1. **Candidates.** PELT (``ruptures``, the l1 cost: a change of the median, which a few
   runs disturbed by the machine's load do not drag as they drag a mean) on the log of
   the speedups, segments at least ``min_segment`` runs long, with a penalty of
   ``penalty`` x sigma x log(n): sigma is the series' noise, estimated from its
   successive differences (their median absolute deviation, which a step moves by one
   difference only), so the same setting serves a quiet and a noisy machine.
2. **Significance.** Each candidate splits its neighbourhood (from the change before it
   to the change after it) in two; a two-sided Mann-Whitney test of the speedups before
   against those after gives its p-value. Candidates above ``alpha``, or that moved the
   median speedup by less than ``min_change``, are dropped and the survivors tested
   again with their new neighbourhoods, until every change left passes.

Why ruptures: it is a maintained library made for offline change-point detection (PELT,
binary segmentation, kernel costs) whose only dependencies are numpy and scipy. Apache
Otava (e-divisive means, the method MongoDB uses on its CI history) was the first
choice; its 0.8 release pins numpy 2.2 and ruamel.yaml exactly and pulls in BigQuery,
Postgres and Slack clients, which would conflict with IREE's numpy here. The permutation
test of e-divisive is replaced by the rank test above, which, like it, assumes nothing
about the noise's distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_SEGMENT = 4
"""Fewest runs on either side of a change: fewer cannot be told from an outlier."""
PENALTY = 3.0
ALPHA = 0.001
MIN_CHANGE = 0.02


@dataclass(frozen=True)
class Settings:
    """How sure a change must be (see the module docstring)."""

    penalty: float = PENALTY
    alpha: float = ALPHA
    min_change: float = MIN_CHANGE
    min_segment: int = MIN_SEGMENT


@dataclass(frozen=True)
class Change:
    """A step in a series: the first run after it is ``index``."""

    index: int
    before: float
    """Median speedup from the previous change (or the start) to this one."""
    after: float
    """Median speedup from this change to the next (or the end)."""
    p_value: float

    @property
    def relative(self) -> float:
        """``after / before - 1``: negative is a regression."""
        return self.after / self.before - 1.0

    @property
    def is_regression(self) -> bool:
        return self.after < self.before


def noise(values: Sequence[float]) -> float:
    """The series' noise (a standard deviation), from its successive differences: their
    median absolute deviation / (0.6745 x sqrt 2). A step moves one difference, not the
    median of them; 0 for fewer than 3 values."""
    if len(values) < 3:
        return 0.0
    diffs = np.diff(np.asarray(values, dtype=float))
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return mad / (0.6745 * math.sqrt(2.0))


def change_points(speedups: Sequence[float], settings: Settings | None = None) -> list[Change]:
    """The significant changes in ``speedups`` (positive, oldest first), oldest first
    (``settings``: the defaults when None)."""
    settings = settings or Settings()
    n = len(speedups)
    if n < 2 * settings.min_segment:
        return []
    logs = np.log(np.asarray(speedups, dtype=float))
    sigma = noise(logs.tolist())
    if sigma == 0.0:
        sigma = float(np.std(logs)) or 1e-12
    try:
        import ruptures  # an optional dependency: tdsched[history]
    except ImportError as exc:
        raise ValueError(
            f"finding change points needs ruptures ({exc}): pip install 'tdsched[history]'"
        ) from exc

    algo = ruptures.Pelt(model="l1", min_size=settings.min_segment, jump=1).fit(logs)
    ends = algo.predict(pen=settings.penalty * sigma * math.log(n))
    indices = [int(i) for i in ends[:-1]]  # the last "end" is n
    while True:
        changes = _tested(speedups, indices)
        kept = [c for c in changes if _significant(c, settings)]
        if len(kept) == len(changes):
            return kept
        indices = [c.index for c in kept]


def _tested(speedups: Sequence[float], indices: list[int]) -> list[Change]:
    from scipy.stats import mannwhitneyu  # ruptures' dependency

    bounds = [0, *indices, len(speedups)]
    changes = []
    for k, index in enumerate(indices):
        before = list(speedups[bounds[k] : index])
        after = list(speedups[index : bounds[k + 2]])
        p = float(mannwhitneyu(before, after, alternative="two-sided").pvalue)
        changes.append(Change(index, float(np.median(before)), float(np.median(after)), p))
    return changes


def _significant(change: Change, settings: Settings) -> bool:
    return change.p_value <= settings.alpha and abs(change.relative) >= settings.min_change
