"""Which candidates a sweep evaluates, and in what order.

A strategy proposes batches of points from the valid candidates, seeing the scores
(speedup over IREE default; ``None`` for a failed candidate) of everything evaluated so
far, and proposes an empty batch when it is done. Proposals never repeat a point.
The sampling strategies take ``first``: points they evaluate before any other (the
recipe's own values at this shape, so that a sweep always measures what the recipe
would run without it).

* :class:`Grid`: every valid candidate, in space order.
* :class:`RandomSample`: ``samples`` distinct candidates drawn with a seed.
* :class:`Evolutionary`: an adaptive search for large spaces. It seeds a population at
  random (one point for each value of a text axis first), then spends the rest of its
  budget alternating two kinds of proposal: mutations of the best candidates so far (one
  or two parameters moved to an adjacent value of their axis, and crossovers of two of
  the best), and the favourites of a cost model fitted to everything measured. The cost
  model is a :class:`Ranker`: the learned one (:class:`~.cost_model.LearnedModel`, which
  also learns from the results database and then screens the mutations too, measuring
  the ones it predicts fastest first), or without it an additive one (each axis value
  scores the mean speedup of the candidates that have it). Tile-size spaces are smooth
  along each axis and dominated by per-parameter effects; see ``docs/benchmarks.md`` for
  its hit rate.
* ``model`` (:class:`~.cost_model.ModelGuided`): the learned cost model alone ranks the
  candidates.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Protocol

from ..dsl.space import ParamValue, Point

History = Mapping[Point, float | None]
STRATEGIES = ("grid", "random", "adaptive", "model")


def valid_first(first: Sequence[Point], points: Sequence[Point]) -> list[Point]:
    """``first`` without repeats and without what is not among the valid ``points``."""
    valid = set(points)
    return [p for p in dict.fromkeys(first) if p in valid]


class Strategy(Protocol):
    name: str
    planned: int
    """How many candidates the strategy will evaluate (for progress and ETA)."""

    def propose(self, history: History) -> list[Point]:
        """The next batch (points not in ``history``); empty when the strategy is done."""


class Ranker(Protocol):
    """A cost model: orders unseen candidates by predicted speedup."""

    @property
    def primed(self) -> bool:
        """Whether it ranks well before the sweep measured anything (it learned from
        recorded results), so a random start is not needed."""

    def rank(self, unseen: Sequence[Point], history: History) -> list[Point]:
        """``unseen``, predicted fastest first, given the scores in ``history``."""


class Grid:
    """Every valid candidate, once."""

    name = "grid"

    def __init__(self, points: Sequence[Point]) -> None:
        self.points = list(points)
        self.planned = len(self.points)

    def propose(self, history: History) -> list[Point]:
        return [p for p in self.points if p not in history]


class RandomSample:
    """``samples`` distinct valid candidates: ``first``, then points drawn reproducibly
    from ``seed``."""

    name = "random"

    def __init__(
        self, points: Sequence[Point], samples: int, seed: int, first: Sequence[Point] = ()
    ) -> None:
        first = valid_first(first, points)[:samples]
        rest = [p for p in points if p not in first]
        drawn = random.Random(seed).sample(rest, min(samples - len(first), len(rest)))
        self.chosen = first + drawn
        self.planned = len(self.chosen)

    def propose(self, history: History) -> list[Point]:
        return [p for p in self.chosen if p not in history]


class Evolutionary:
    """Adaptive search: random seeding, then mutation and crossover of the best.

    ``budget`` is the number of candidates evaluated in all; ``batch`` how many are
    proposed at a time (compiled in parallel); ``axes`` the values of each axis, so a
    mutation can move a parameter to an adjacent value. ``model``: the learned cost
    model, if any (else the additive one); a primed model skips the random seeding
    beyond one batch. ``first``: points the seeding takes before any other.
    """

    name = "adaptive"

    def __init__(
        self,
        points: Sequence[Point],
        axes: Sequence[Sequence[ParamValue]],
        budget: int,
        seed: int,
        batch: int = 4,
        elite: int = 4,
        model: Ranker | None = None,
        first: Sequence[Point] = (),
    ) -> None:
        self.valid = set(points)
        self.first = valid_first(first, points)
        self.order = list(points)
        self.axes = [list(values) for values in axes]
        self.budget = min(budget, len(points))
        self.planned = self.budget
        self.rng = random.Random(seed)
        self.batch = max(1, batch)
        self.elite = elite
        self.model = model
        primed = model is not None and model.primed
        self.initial = self.batch if primed else max(self.batch, self.budget // 4)

    @property
    def cost_model(self) -> str:
        """``learned`` with a model given, else ``additive``."""
        return "additive" if self.model is None else "learned"

    def propose(self, history: History) -> list[Point]:
        left = self.budget - len(history)
        if left <= 0:
            return []
        size = min(left, self.batch)
        if len(history) < self.initial:
            size = min(left, self.initial - len(history))
            return self._seeding(history, size)
        ranked = sorted(
            (p for p, score in history.items() if score is not None),
            key=lambda p: history[p] or 0.0,
            reverse=True,
        )
        parents = ranked[: self.elite]
        offspring = self._offspring(parents)
        if self.model is None:
            favourites = self._additive_ranking(history)
        else:
            favourites = self.model.rank([p for p in self.order if p not in history], history)
            position = {p: i for i, p in enumerate(favourites)}
            offspring = sorted(
                (p for p in dict.fromkeys(offspring) if p in position), key=position.__getitem__
            )
        chosen: list[Point] = []
        for candidate in self._interleave(offspring, favourites):
            if candidate in self.valid and candidate not in history and candidate not in chosen:
                chosen.append(candidate)
                if len(chosen) == size:
                    return chosen
        return chosen + self._random({**history, **dict.fromkeys(chosen)}, size - len(chosen))

    def _offspring(self, parents: list[Point]) -> list[Point]:
        """Neighbours of the best first (one axis moved), then two-axis moves and crossovers."""
        single: list[Point] = []
        double: list[Point] = []
        for parent in parents:
            moves = self._moves(parent)
            self.rng.shuffle(moves)
            single += moves
            for first in moves:
                double += self._moves(first)
        crosses = [
            tuple(self.rng.choice(pair) for pair in zip(a, b, strict=True))
            for i, a in enumerate(parents)
            for b in parents[i + 1 :]
        ]
        self.rng.shuffle(double)
        return single + crosses + double

    def _additive_ranking(self, history: History) -> list[Point]:
        """Unseen points ranked by an additive model: each axis value scores the mean of
        the evaluated points that have it (a failed point scores as the worst seen)."""
        scores = [v for v in history.values() if v is not None]
        worst = min(scores, default=0.0)
        value_scores: list[dict[ParamValue, list[float]]] = [{} for _ in self.axes]
        for point, score in history.items():
            for axis, value in enumerate(point):
                value_scores[axis].setdefault(value, []).append(worst if score is None else score)
        means = [{v: sum(s) / len(s) for v, s in axis.items()} for axis in value_scores]

        def predict(point: Point) -> float:
            return sum(means[a].get(v, worst) for a, v in enumerate(point))

        unseen = [p for p in self.order if p not in history]
        return sorted(unseen, key=predict, reverse=True)

    @staticmethod
    def _interleave(first: list[Point], second: list[Point]) -> list[Point]:
        """Alternate the two proposal lists (offspring of the best, model's favourites)."""
        merged: list[Point] = []
        for pair in zip(first, second, strict=False):
            merged.extend(pair)
        longer = first if len(first) > len(second) else second
        return merged + longer[min(len(first), len(second)) :]

    def _moves(self, point: Point) -> list[Point]:
        moves = []
        for axis, values in enumerate(self.axes):
            index = values.index(point[axis])
            for step in (-1, 1):
                if 0 <= index + step < len(values):
                    moved = list(point)
                    moved[axis] = values[index + step]
                    moves.append(tuple(moved))
        return moves

    def _seeding(self, history: History, size: int) -> list[Point]:
        """``first``, then random points, after one for each value of a text axis (an
        alternative such as ``LAYOUT: [rowmajor, packed]``) that no evaluated point has
        yet: an alternative with few candidates would otherwise rarely be drawn, and the
        mutations never move to it when its points pin the other parameters."""
        chosen = [p for p in self.first if p not in history][:size]
        for axis, values in enumerate(self.axes):
            for value in values:
                if not isinstance(value, str) or len(chosen) == size:
                    continue
                if any(p[axis] == value for p in [*history, *chosen]):
                    continue
                having = [p for p in self.order if p[axis] == value and p not in history]
                if having:
                    chosen.append(self.rng.choice(having))
        seen = {**history, **dict.fromkeys(chosen)}
        return chosen + self._random(seen, size - len(chosen))

    def _random(self, history: History, size: int) -> list[Point]:
        unseen = [p for p in self.order if p not in history]
        return self.rng.sample(unseen, min(size, len(unseen)))
