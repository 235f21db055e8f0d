"""Racing: deciding which of a sweep's leading candidates is really the fastest.

A screening measurement (a few rounds per candidate, each paired with IREE default) ranks
the whole space; the leaders then *race*: they and IREE default are timed round after
round in one process, every variant once per round in alternating order, so each round
is a set of samples taken moments apart and the machine's drift cancels in their ratios.

A race may start with a wide field: after ``min_rounds`` rounds it keeps the ``keep``
runners with the best median speedups and drops the rest (the first cut of successive
halving), so screening's short measurement only has to place the best within a field,
not within the ``keep`` that race on.

After each round (from ``min_rounds`` on) the race compares every runner with the
leader (the runner with the best median speedup over IREE default) on the per-round
ratio ``runner's time / leader's time``: when the distribution-free confidence interval
of that ratio's median lies wholly above 1, the runner is clearly slower and leaves the
race (successive elimination, as F-race does with its pairwise tests). The test is
repeated after every round, so it uses a stricter confidence (99%) than the intervals
reported (95%): simulated with 15% noise, two equally fast candidates were told apart
(one wrongly eliminated) in 8% of races at 99%, 18% at 95%. The race stops

* ``decided``: one runner is left;
* ``tie``: every runner left is within ``tie`` of the leader (interval inside
  ``[1 - tie, 1 + tie]``): they are equally fast as far as timing can tell;
* ``undecided``: ``max_rounds`` or ``time_cap_s`` ran out first; the verdict names the
  runners left and how far apart they may be;
* ``alone``: only one candidate entered (it is still timed for its interval).

:class:`Race` is the bookkeeping alone, a pure function of the rounds it is given (tested
with synthetic rounds); :func:`run_race` drives it with a real timer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .timing import Interval, RoundTimer, Variant

BASELINE = "baseline"
"""The name IREE default runs under in a race's rounds."""

Verdict = Literal["decided", "tie", "undecided", "alone"]


@dataclass(frozen=True)
class RaceSettings:
    """How long a race may go on and what it takes to decide it."""

    min_rounds: int = 5
    """Rounds before anyone is eliminated (a median interval needs a few samples)."""
    keep: int = 8
    """Runners kept after ``min_rounds`` rounds (the best medians); the rest are cut."""
    max_rounds: int = 40
    time_cap_s: float = 10.0
    """Seconds of timing after which the race stops, decided or not."""
    sample_s: float = 0.02
    """Seconds of back-to-back calls per variant per round."""
    confidence: float = 0.95
    """Of the intervals reported."""
    eliminate_confidence: float = 0.99
    """Of the interval that must lie above 1 to eliminate a runner."""
    tie: float = 0.02
    """Runners whose ratio to the leader is known to within this are equally fast."""


@dataclass(frozen=True)
class Standing:
    """Where one candidate finished."""

    key: str
    place: int
    """1 for the winner; runners still in the race at the end come before those
    eliminated, each group by median speedup."""
    speedup: Interval
    """Over IREE default: the per-round ratio ``IREE default / candidate``."""
    rounds: int
    eliminated_after: int | None
    """The round after which it was found clearly slower than the leader."""
    behind_leader: Interval | None
    """``its time / the winner's time`` per round, over the rounds it raced (None for the
    winner)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "place": self.place,
            "speedup": self.speedup.as_list(),
            "rounds": self.rounds,
            "eliminated_after": self.eliminated_after,
            "behind_leader": self.behind_leader.as_list() if self.behind_leader else None,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Standing:
        behind = data.get("behind_leader")
        return Standing(
            key=data["key"],
            place=data["place"],
            speedup=Interval.from_list(data["speedup"]),
            rounds=data["rounds"],
            eliminated_after=data.get("eliminated_after"),
            behind_leader=Interval.from_list(behind) if behind else None,
        )


@dataclass(frozen=True)
class RaceResult:
    """How a race ended: the standings (winner first) and the verdict."""

    standings: tuple[Standing, ...]
    verdict: Verdict
    rounds: int
    seconds: float
    """Wall time of the race's timing."""

    @property
    def winner(self) -> Standing:
        return self.standings[0]

    @property
    def contenders(self) -> tuple[Standing, ...]:
        """The runners not eliminated (the winner included)."""
        return tuple(s for s in self.standings if s.eliminated_after is None)

    @property
    def margin(self) -> float | None:
        """For ``tie`` / ``undecided``: how far (a fraction) a remaining runner may be from
        the winner either way; for ``decided``: how much faster the winner is at least than
        the closest runner shown to be slower (runners cut from a wide field by their
        median were not, and do not count); None when nobody else raced, or no runner was
        shown slower."""
        others = [s.behind_leader for s in self.standings[1:] if s.behind_leader]
        if not others:
            return None
        if self.verdict == "decided":
            slower = [b.low for b in others if b.low >= 1.0]
            return min(slower) - 1.0 if slower else None
        left = [s.behind_leader for s in self.contenders[1:] if s.behind_leader]
        return max(max(1.0 - b.low, b.high - 1.0) for b in left)

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "rounds": self.rounds,
            "seconds": round(self.seconds, 3),
            "standings": [s.as_dict() for s in self.standings],
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> RaceResult:
        return RaceResult(
            standings=tuple(Standing.from_dict(s) for s in data["standings"]),
            verdict=data["verdict"],
            rounds=data["rounds"],
            seconds=data["seconds"],
        )


class Race:
    """The race's bookkeeping: feed it rounds, ask whom to drop and whether it is over."""

    def __init__(self, keys: Sequence[str], settings: RaceSettings) -> None:
        if not keys:
            raise ValueError("a race needs at least one candidate")
        if BASELINE in keys:
            raise ValueError(f"{BASELINE!r} names IREE default in a race")
        self.settings = settings
        self.running = list(keys)
        self.times: dict[str, list[float]] = {k: [] for k in keys}
        self.baseline: list[float] = []
        self.eliminated: dict[str, int] = {}
        self.alone = len(keys) == 1

    @property
    def rounds(self) -> int:
        return len(self.baseline)

    def add_round(self, times: Mapping[str, float]) -> None:
        """One round's milliseconds per call: IREE default and every runner."""
        self.baseline.append(times[BASELINE])
        for key in self.running:
            self.times[key].append(times[key])

    def speedup(self, key: str) -> Interval:
        """``key``'s speedup over IREE default, over the rounds it raced."""
        return Interval.of_ratios(self.baseline, self.times[key], self.settings.confidence)

    def leader(self) -> str:
        return max(self.running, key=lambda k: self.speedup(k).median)

    def behind(self, key: str, leader: str, confidence: float | None = None) -> Interval:
        """``key``'s time over ``leader``'s, round by round, over the rounds both raced."""
        confidence = confidence or self.settings.confidence
        return Interval.of_ratios(self.times[key], self.times[leader], confidence)

    def eliminate(self) -> list[str]:
        """Drop (and return) the runners cut from a wide field, then those clearly slower
        than the leader."""
        if self.rounds < self.settings.min_rounds or len(self.running) < 2:
            return []
        by_speed = sorted(self.running, key=lambda k: self.speedup(k).median, reverse=True)
        cut = by_speed[self.settings.keep :]
        for key in cut:
            self.running.remove(key)
            self.eliminated[key] = self.rounds
        leader = self.leader()
        strict = self.settings.eliminate_confidence
        slower = [
            k for k in self.running if k != leader and self.behind(k, leader, strict).low > 1.0
        ]
        for key in slower:
            self.running.remove(key)
            self.eliminated[key] = self.rounds
        return cut + slower

    def verdict(self, elapsed_s: float) -> Verdict | None:
        """How the race ends now, or None while it should go on."""
        s = self.settings
        if self.rounds < s.min_rounds:
            return None
        if self.alone:
            return "alone"
        if len(self.running) == 1:
            return "decided"
        leader = self.leader()
        close = all(
            1.0 - s.tie <= b.low and b.high <= 1.0 + s.tie
            for b in (self.behind(k, leader) for k in self.running if k != leader)
        )
        if close:
            return "tie"
        if self.rounds >= s.max_rounds or elapsed_s >= s.time_cap_s:
            return "undecided"
        return None

    def result(self, verdict: Verdict, seconds: float) -> RaceResult:
        """The standings: runners left by median speedup, then the eliminated ones."""
        by_speed = sorted(self.times, key=lambda k: self.speedup(k).median, reverse=True)
        order = [k for k in by_speed if k in self.running]
        order += [k for k in by_speed if k not in self.running]
        winner = order[0]
        standings = tuple(
            Standing(
                key=key,
                place=place,
                speedup=self.speedup(key),
                rounds=len(self.times[key]),
                eliminated_after=self.eliminated.get(key),
                behind_leader=None if key == winner else self.behind(key, winner),
            )
            for place, key in enumerate(order, start=1)
        )
        return RaceResult(standings, verdict, self.rounds, seconds)


def run_race(
    runners: Mapping[str, Variant],
    baseline: Variant,
    settings: RaceSettings,
) -> RaceResult:
    """Race ``runners`` (key → one call, or its placements) against each other and IREE
    default."""
    start = time.perf_counter()
    race = Race(list(runners), settings)
    timer = RoundTimer({BASELINE: baseline, **runners}, 1, settings.sample_s)
    while True:
        race.add_round(timer.round())
        for key in race.eliminate():
            timer.drop(key)
        verdict = race.verdict(time.perf_counter() - start)
        if verdict is not None:
            return race.result(verdict, time.perf_counter() - start)


def entrants(
    screened: Sequence[tuple[str, Interval]], limit: int, incumbent: str | None = None
) -> tuple[list[str], list[str]]:
    """Who races: the screened candidates (key, speedup interval), best median first,
    whose interval reaches the screening leader's lower bound, at most ``limit`` of
    them (the field; the race cuts it to its ``keep`` best), and the ``incumbent`` (the
    recipe's own values) when it was screened, whatever its screening: the race, not a
    few screening rounds, decides whether anything beats it. Returns (entrants,
    left_out): ``left_out`` are candidates that could not be told apart from the leader
    but did not fit in ``limit``."""
    ordered = sorted(screened, key=lambda item: item[1].median, reverse=True)
    if not ordered:
        return [], []
    floor = ordered[0][1].low
    close = [key for key, interval in ordered if interval.high >= floor]
    racing, left_out = close[:limit], close[limit:]
    if incumbent in dict(screened) and incumbent not in racing:
        racing.append(incumbent)
        left_out = [key for key in left_out if key != incumbent]
    return racing, left_out


@dataclass(frozen=True)
class Decision:
    """How a sweep picked its best: the race, who could not race, the timing spent."""

    race: RaceResult
    left_out: tuple[str, ...] = ()
    """Candidates as fast as the screening leader within their intervals that did not
    fit the race's size limit."""
    screening_s: float = 0.0
    """Wall seconds the sweep's screening timing took (candidates it timed itself)."""
    kept: str | None = None
    """The recipe's own values (the incumbent, :mod:`.incumbent`), kept as the best: the
    race ended in a tie or undecided with them among the runners left, so nothing was
    shown faster than what the recipe already runs. None: the best is the race's winner."""

    @staticmethod
    def keeping(race: RaceResult, incumbent: str | None) -> str | None:
        """What :attr:`kept` is after ``race`` for the incumbent's key ``incumbent``."""
        left = {s.key for s in race.contenders}
        undecided = race.verdict in ("tie", "undecided")
        return incumbent if undecided and incumbent in left else None

    @property
    def best(self) -> str:
        """The key the sweep calls best: the kept incumbent, else the race's winner."""
        return self.kept or self.race.winner.key

    def standing(self, key: str) -> Standing | None:
        return next((s for s in self.race.standings if s.key == key), None)

    def describe(self, label: Callable[[str], str]) -> str:
        """One line for people; ``label`` names a candidate by its key."""
        race = self.race
        winner = race.winner
        spent = f"{race.rounds} rounds, {race.seconds:.1f} s"
        raced = f"{len(race.standings)} raced"
        margin = race.margin
        if race.verdict == "alone":
            text = f"one candidate raced: {label(winner.key)} ({spent})"
        elif race.verdict == "decided":
            ahead = f", at least {margin:.1%} ahead of the runner-up" if margin is not None else ""
            text = f"decided: {label(winner.key)} is the fastest{ahead} ({raced}, {spent})"
        else:
            names = " and ".join(label(s.key) for s in race.contenders[:3])
            more = len(race.contenders) - 3
            names += f" and {more} more" if more > 0 else ""
            kind = "tie" if race.verdict == "tie" else "undecided"
            taken = (
                f"the recipe's own values ({label(self.kept)}) are kept: nothing raced was "
                "shown faster"
                if self.kept
                else "the best median is taken"
            )
            text = (
                f"{kind} between {names} (within {margin or 0.0:.1%}); {taken} ({raced}, {spent})"
            )
        if self.left_out:
            count = len(self.left_out)
            who = "1 more candidate was" if count == 1 else f"{count} more candidates were"
            text += f"; {who} as fast in screening but did not fit the race's field (raise --race)"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.race.as_dict(),
            "margin": None if self.race.margin is None else round(self.race.margin, 4),
            "left_out": list(self.left_out),
            "screening_s": round(self.screening_s, 3),
            "kept": self.kept,
            "best": self.best,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Decision:
        return Decision(
            RaceResult.from_dict(data),
            tuple(data.get("left_out", ())),
            data.get("screening_s", 0.0),
            data.get("kept"),
        )
