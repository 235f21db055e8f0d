"""The learned cost model: it orders the candidates a sweep evaluates.

``--strategy model`` (:class:`ModelGuided`) follows it alone; ``--strategy adaptive``
uses it (:class:`LearnedModel`) to rank its mutations and its model favourites when
scikit-learn is installed (``--cost-model``).

Gradient-boosted regression trees (scikit-learn, the optional extra ``tdsched[model]``)
predict a candidate's log speedup over IREE default from its parameters. The model
learns from this sweep's measurements and from every recorded result of the same recipe
on the same target in the results database: earlier sweeps, other shapes (sizes are
parameters too, so a 256³ sweep starts from what a 512³ sweep measured).

Features, computed from the parameters alone (any recipe, no knowledge of its schedule):

* ``log2`` of every numeric parameter (swept, fixed and defaults);
* ``log2`` of the product of the swept numeric parameters (the tile volume, when they
  are tile sizes);
* ``log2(fixed / swept)`` for every fixed-swept pair (trip counts, when the fixed one is
  a problem size and the swept one its tile).

A candidate that failed is learned as half the worst speedup measured, so the model
steers away from its region. With ``--strategy model``, each batch after a random start
proposes the candidates the model ranks best, and one random candidate in four
(exploration: a model fitted on few points is confidently wrong in regions it has not
seen).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from ..dsl.space import ParamValue, Point
from .strategies import History, valid_first

EXPLORE = 0.25
"""The share of each batch drawn at random rather than from the model's favourites."""


class ModelUnavailable(ValueError):
    """scikit-learn is not installed (a usage error, reported in one line)."""


def learned_model_available() -> bool:
    """Whether scikit-learn imports (``tdsched[model]`` is installed)."""
    try:
        import sklearn.ensemble  # noqa: F401
    except ImportError:
        return False
    return True


def _regressor() -> Any:
    try:
        from sklearn.ensemble import GradientBoostingRegressor
    except ImportError as exc:
        raise ModelUnavailable(
            "the learned cost model (--strategy model, --cost-model learned) needs "
            "scikit-learn: pip install 'tdsched[model]'"
        ) from exc
    return GradientBoostingRegressor(
        n_estimators=150, max_depth=3, learning_rate=0.1, subsample=1.0, random_state=0
    )


class Featurizer:
    """Parameters → feature vector (see the module docstring)."""

    def __init__(self, names: Sequence[str], defaults: Mapping[str, ParamValue]) -> None:
        self.names = list(names)
        """The swept parameters, in point order."""
        self.defaults = dict(defaults)
        self.numeric = sorted(k for k, v in self.defaults.items() if _is_number(v))
        self.fixed = [k for k in self.numeric if k not in self.names]
        self.swept = [k for k in self.names if k in self.numeric]

    def params(self, point: Point) -> dict[str, ParamValue]:
        return {**self.defaults, **dict(zip(self.names, point, strict=True))}

    def key(self, params: Mapping[str, ParamValue]) -> tuple[tuple[str, str], ...]:
        """What identifies a parameter set (a recorded result and a point of this sweep
        with the same key are one measurement, learned once)."""
        return tuple(sorted((k, repr(v)) for k, v in {**self.defaults, **params}.items()))

    def __call__(self, params: Mapping[str, ParamValue]) -> list[float]:
        merged = {**self.defaults, **params}
        values = {k: _log2(merged.get(k)) for k in self.numeric}
        row = [values[k] for k in self.numeric]
        row.append(sum(values[k] for k in self.swept))
        row += [values[f] - values[s] for f in self.fixed for s in self.swept]
        return row


PRIMED = 8
"""Recorded results from which a model starts without a random start of its own."""


class LearnedModel:
    """Gradient-boosted trees that rank candidates by predicted speedup.

    Fitted afresh on every call of :meth:`rank`, on ``prior`` (recorded results of the
    same recipe and target from other sweeps: ``(parameters, speedup or None for a
    failure)``) and on this sweep's history. Raises :class:`ModelUnavailable` when
    scikit-learn is missing, so a sweep fails before it evaluates anything.
    """

    def __init__(
        self,
        featurizer: Featurizer,
        prior: Sequence[tuple[Mapping[str, ParamValue], float | None]] = (),
    ) -> None:
        self.featurize = featurizer
        self.prior = [(featurizer.key(p), featurizer(p), score) for p, score in prior]
        self._regressor = _regressor()

    @property
    def primed(self) -> bool:
        """Whether the prior is large enough to rank well before this sweep measures."""
        return len(self.prior) >= PRIMED

    def rank(self, unseen: Sequence[Point], history: History) -> list[Point]:
        """``unseen`` by predicted speedup, best first (fitted on prior and history; in
        the given order while fewer than two speedups are known)."""
        current = {self.featurize.key(self.featurize.params(p)): s for p, s in history.items()}
        rows = [(x, s) for key, x, s in self.prior if key not in current]
        rows += [(self.featurize(self.featurize.params(p)), s) for p, s in history.items()]
        measured = [s for _, s in rows if s is not None and s > 0]
        if len(measured) < 2 or not unseen:
            return list(unseen)
        floor = math.log(min(measured) / 2.0)
        targets = [math.log(s) if s is not None and s > 0 else floor for _, s in rows]
        model = self._regressor
        model.fit([x for x, _ in rows], targets)
        predicted = model.predict([self.featurize(self.featurize.params(p)) for p in unseen])
        order = sorted(range(len(unseen)), key=lambda i: float(predicted[i]), reverse=True)
        return [unseen[i] for i in order]


class ModelGuided:
    """Random start (after ``first``), then the model's favourites (with some
    exploration) batch by batch.

    ``prior``: see :class:`LearnedModel`.
    """

    name = "model"

    def __init__(
        self,
        points: Sequence[Point],
        featurizer: Featurizer,
        budget: int,
        seed: int,
        batch: int,
        prior: Sequence[tuple[Mapping[str, ParamValue], float | None]] = (),
        first: Sequence[Point] = (),
    ) -> None:
        self.order = list(points)
        self.first = valid_first(first, points)
        self.model = LearnedModel(featurizer, prior)  # fails early without scikit-learn
        self.budget = min(budget, len(points))
        self.planned = self.budget
        self.rng = random.Random(seed)
        self.batch = max(1, batch)
        start = self.batch if self.model.primed else max(self.batch, self.budget // 5)
        self.initial = min(self.budget, start)

    def propose(self, history: History) -> list[Point]:
        left = self.budget - len(history)
        if left <= 0:
            return []
        unseen = [p for p in self.order if p not in history]
        if len(history) < self.initial:
            size = min(self.initial - len(history), len(unseen))
            chosen = [p for p in self.first if p not in history][:size]
            rest = [p for p in unseen if p not in chosen]
            return chosen + self.rng.sample(rest, size - len(chosen))
        size = min(left, self.batch)
        ranked = self.model.rank(unseen, history)
        explore = int(size * EXPLORE)
        chosen = ranked[: size - explore]
        rest = [p for p in unseen if p not in chosen]
        return chosen + self.rng.sample(rest, min(explore, len(rest)))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _log2(value: object) -> float:
    """log2 of a positive number; 0 → -1 (a tile size 0 means 'not tiled'); else 0."""
    if not _is_number(value):
        return 0.0
    number = float(value)  # type: ignore[arg-type]
    return math.log2(number) if number > 0 else -1.0
