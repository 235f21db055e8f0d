"""Racing rules, on synthetic rounds (no timing): who is eliminated, when a race stops,
which verdict it gives, and who may enter. See ``schedules/sweep/racing.py``."""

from __future__ import annotations

import random

import pytest
from tdsched.targets.racing import (
    BASELINE,
    Decision,
    Race,
    RaceResult,
    RaceSettings,
    Standing,
    entrants,
)
from tdsched.targets.timing import Interval

SETTINGS = RaceSettings(min_rounds=5, max_rounds=40, time_cap_s=1e9, tie=0.02)


def _race(speeds: dict[str, float], noise: float, rounds: int, seed: int = 0) -> Race:
    """Feed ``rounds`` rounds in which each candidate takes ``1 / speed`` ms (IREE default
    1 ms) times a shared per-round drift and its own noise; stop when the race would."""
    rng = random.Random(seed)
    race = Race(list(speeds), SETTINGS)
    for _ in range(rounds):
        drift = rng.uniform(0.5, 2.0)  # the machine's speed moves a lot between rounds
        times = {BASELINE: drift * rng.uniform(1 - noise, 1 + noise)}
        for key in race.running:
            times[key] = drift / speeds[key] * rng.uniform(1 - noise, 1 + noise)
        race.add_round(times)
        race.eliminate()
        if race.verdict(0.0) is not None:
            break
    return race


def test_a_clearly_faster_candidate_wins_and_the_others_are_eliminated() -> None:
    race = _race({"a": 1.30, "b": 1.00, "c": 1.10, "d": 1.20}, noise=0.02, rounds=40)
    result = race.result(race.verdict(0.0) or "undecided", 1.0)
    assert result.verdict == "decided"
    assert [s.key for s in result.standings] == ["a", "d", "c", "b"]
    assert result.winner.eliminated_after is None
    assert all(s.eliminated_after is not None for s in result.standings[1:])
    # The shared drift (0.5x-2x per round) cancels in the paired ratios.
    assert result.winner.speedup.low > 1.2 and result.winner.speedup.high < 1.4
    assert result.margin is not None and result.margin > 0.0


def test_a_runner_cut_by_its_median_does_not_set_the_decided_margin() -> None:
    cut = Interval(0.95, 0.88, 1.10)  # cut from a wide field: not shown slower
    slower = Interval(1.20, 1.15, 1.30)
    winner = Interval(1.5, 1.4, 1.6)
    result = RaceResult(
        (
            Standing("a", 1, winner, 20, None, None),
            Standing("b", 2, Interval(1.2, 1.1, 1.3), 20, 20, slower),
            Standing("c", 3, Interval(1.4, 1.0, 1.7), 5, 5, cut),
        ),
        "decided",
        20,
        1.0,
    )
    assert result.margin == pytest.approx(0.15)
    text = Decision(result).describe(str)
    assert text.startswith("decided: a is the fastest, at least 15.0% ahead of the runner-up")
    only_cut = RaceResult(result.standings[::2], "decided", 20, 1.0)
    assert only_cut.margin is None
    assert Decision(only_cut).describe(str).startswith("decided: a is the fastest (2 raced")


def test_nobody_is_eliminated_before_min_rounds() -> None:
    race = Race(["a", "b"], SETTINGS)
    for _ in range(SETTINGS.min_rounds - 1):
        race.add_round({BASELINE: 1.0, "a": 0.5, "b": 1.0})
        assert race.eliminate() == []
        assert race.verdict(0.0) is None


def test_equal_candidates_end_in_a_tie_within_the_tie_fraction() -> None:
    race = _race({"a": 1.0, "b": 1.0}, noise=0.001, rounds=40)
    result = race.result(race.verdict(0.0) or "undecided", 1.0)
    assert result.verdict == "tie"
    assert len(result.contenders) == 2
    assert result.margin is not None and result.margin <= SETTINGS.tie


def test_close_noisy_candidates_leave_the_race_undecided_with_a_margin() -> None:
    race = _race({"a": 1.0, "b": 1.0}, noise=0.3, rounds=SETTINGS.max_rounds)
    assert race.verdict(0.0) == "undecided"
    result = race.result("undecided", 1.0)
    assert len(result.contenders) == 2
    margin = result.margin
    assert margin is not None and margin > SETTINGS.tie
    text = Decision(result).describe(str.upper)
    assert text.startswith("undecided between A and B (within ") or text.startswith(
        "undecided between B and A (within "
    )


@pytest.mark.parametrize(
    ("speeds", "noise", "kept"),
    [
        ({"a": 1.0, "b": 1.0}, 0.001, "b"),  # a tie: nothing shown faster than b
        ({"a": 1.0, "b": 1.0}, 0.3, "b"),  # undecided: the same
        ({"a": 1.3, "b": 1.0}, 0.02, None),  # a decided win over b
    ],
)
def test_the_recipe_s_own_values_are_kept_unless_something_is_shown_faster(
    speeds: dict[str, float], noise: float, kept: str | None
) -> None:
    race = _race(speeds, noise, rounds=SETTINGS.max_rounds)
    result = race.result(race.verdict(0.0) or "undecided", 1.0)
    decision = Decision(result, kept=Decision.keeping(result, "b"))
    assert decision.kept == kept
    assert decision.best == (kept or result.winner.key) == decision.as_dict()["best"]
    assert Decision.from_dict(decision.as_dict()).kept == kept
    text = decision.describe(str.upper)
    if kept:
        assert "; the recipe's own values (B) are kept: nothing raced was shown faster" in text
    else:
        assert text.startswith("decided: A is the fastest")
    # a candidate that did not race (or was eliminated) is never kept
    assert Decision.keeping(result, "c") is None


def test_the_time_cap_stops_a_race() -> None:
    race = Race(["a", "b"], SETTINGS)
    for i in range(SETTINGS.min_rounds):
        race.add_round({BASELINE: 1.0, "a": 1.0 + 0.2 * (i % 2), "b": 1.1 - 0.2 * (i % 2)})
    assert race.verdict(0.0) is None
    assert race.verdict(SETTINGS.time_cap_s) == "undecided"


def test_a_lone_candidate_is_still_timed_for_its_interval() -> None:
    race = _race({"a": 1.5}, noise=0.05, rounds=40)
    assert race.rounds == SETTINGS.min_rounds
    result = race.result("alone", 1.0)
    assert result.margin is None
    assert result.winner.speedup.low <= 1.5 <= result.winner.speedup.high + 0.1
    assert Decision(result).describe(str).startswith("one candidate raced: a")


def test_results_round_trip_through_json_dicts() -> None:
    race = _race({"a": 1.3, "b": 1.0}, noise=0.02, rounds=40)
    decision = Decision(race.result("decided", 2.5), ("c",), 7.0)
    again = Decision.from_dict(decision.as_dict())
    assert again.race.standings[0].key == "a"
    assert again.left_out == ("c",)
    assert again.screening_s == 7.0
    assert RaceResult.from_dict(decision.race.as_dict()).verdict == "decided"
    assert "raise --race" in again.describe(str)


def test_entrants_are_those_screening_cannot_separate_from_the_leader() -> None:
    screened = [
        ("slow", Interval(0.8, 0.7, 0.9)),
        ("lead", Interval(1.5, 1.3, 1.7)),
        ("close", Interval(1.2, 1.0, 1.35)),  # reaches the leader's low
        ("behind", Interval(1.1, 1.0, 1.25)),  # does not
    ]
    assert entrants(screened, 8) == (["lead", "close"], [])
    assert entrants(screened, 1) == (["lead"], ["close"])
    assert entrants([], 8) == ([], [])


def test_a_race_needs_real_candidate_names() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Race([], SETTINGS)
    with pytest.raises(ValueError, match="IREE default"):
        Race([BASELINE], SETTINGS)


def test_a_wide_field_is_cut_to_keep_after_min_rounds() -> None:
    settings = RaceSettings(min_rounds=5, keep=2, time_cap_s=1e9)
    speeds = {"a": 1.3, "b": 1.25, "c": 1.0, "d": 0.9, "e": 1.1}
    race = Race(list(speeds), settings)
    for i in range(settings.min_rounds):
        drift = 1.0 + 0.1 * (i % 3)
        race.add_round({BASELINE: drift, **{k: drift / v for k, v in speeds.items()}})
        dropped = race.eliminate()
    # c, d, e are cut (not among the 2 best medians); b, noise-free 4% slower than a
    # in every round, is then clearly slower and eliminated too.
    assert dropped[:3] == ["e", "c", "d"] and dropped[3:] == ["b"]
    assert race.running == ["a"] and race.verdict(0.0) == "decided"
    result = race.result("decided", 1.0)
    assert [s.key for s in result.standings] == ["a", "b", "e", "c", "d"]
    assert all(s.eliminated_after == 5 for s in result.standings[1:])
