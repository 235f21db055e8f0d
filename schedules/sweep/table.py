"""Ranked result tables, shared by ``tdsched sweep`` and ``tdsched report``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tdsched.targets.racing import Decision, Standing
from tdsched.targets.timing import Interval

from ..base.text_table import aligned
from .database import Result, drift


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _interval(value: Interval) -> str:
    return f"{value.median:.3f}x [{value.low:.3f},{value.high:.3f}]"


def _screened(r: Result) -> str:
    if r.speedup is None:
        return "-"
    if r.speedup_low is None or r.speedup_high is None:
        return f"{r.speedup:.3f}x"
    return _interval(Interval(r.speedup, r.speedup_low, r.speedup_high))


def _race_state(standing: Standing | None, best: str | None) -> str:
    if standing is None:
        return "-"
    if standing.key == best:
        return "best"
    if standing.eliminated_after is None:
        return "close"
    return f"out@{standing.eliminated_after}"


def ranked_table(
    ranked: Sequence[Result],
    failed: Sequence[Result],
    names: Sequence[str],
    top: int,
    decision: Decision | None,
    ignored: Mapping[tuple[Any, ...], tuple[str, ...]] | None = None,
) -> str:
    """The best ``top`` correct candidates, then a line per failure kind.

    Columns: rank, each swept parameter, median ms and IREE default's median ms timed
    beside it (screening), the screening speedup over IREE default and its 95% interval,
    the race's speedup and interval, how the candidate ended the race (``best``: the
    decision's best, the race's winner or the recipe's own values it kept;
    ``close``: not separable from the best; ``out@R``: clearly slower, dropped after
    round R; ``-``: did not race), and the largest error against the reference. A
    parameter the candidate's build does not read (``ignored``: by point, from
    :attr:`~tdsched.schedules.dsl.space.Enumeration.ignored`) shows as ``-``.
    """
    header = ["#", *names, "ms", "base_ms", "screened [95%]", "raced [95%]", "race", "max_err"]
    rows = []
    for i, r in enumerate(ranked[:top]):
        standing = decision.standing(r.key) if decision else None
        rows.append(
            [
                str(i + 1),
                *(_value(r, n, names, ignored) for n in names),
                _fmt(r.time_ms, ".4g"),
                _fmt(r.baseline_ms, ".4g"),
                _screened(r),
                _interval(standing.speedup) if standing else "-",
                _race_state(standing, decision.best if decision else None),
                _fmt(r.max_abs_error, ".2g"),
            ]
        )
    lines = aligned([header, *rows], right=True)
    if len(ranked) > top:
        lines.append(f"... {len(ranked) - top} more correct candidates (--top N shows more)")
    kinds: dict[str, list[Result]] = {}
    for r in failed:
        kinds.setdefault(r.status, []).append(r)
    for status, results in sorted(kinds.items()):
        example = results[0]
        skip = ignored_by(example, names, ignored)
        params = ", ".join(f"{n}={example.params.get(n)}" for n in names if n not in skip)
        lines.append(f"{status}: {len(results)} (e.g. {params}: {cause(example.error)})")
    return "\n".join(lines)


def cause(error: str | None) -> str:
    """One line saying why a candidate failed: the error's first line, and when that only
    introduces what follows (``iree-compile failed (exit 1):``), the first line after it
    that says what went wrong."""
    lines = [ln.strip() for ln in (error or "").splitlines() if ln.strip()]
    if not lines:
        return "no message"
    if not lines[0].endswith(":") or len(lines) == 1:
        return lines[0]
    detail = next((ln for ln in lines[1:] if "error:" in ln), lines[1])
    return f"{lines[0]} {detail}"


def baseline_line(baselines: Mapping[str, float]) -> str:
    """IREE default's median at the start and the end of a sweep, and the drift."""
    if "start" not in baselines:
        return "IREE default not timed (no candidate was timed)"
    change = drift(baselines)
    end = (
        f", {baselines['end']:.4g} ms at the end (drift {change:+.1%})"
        if change is not None
        else ""
    )
    return f"IREE default {baselines['start']:.4g} ms at the start{end}"


def reuse_line(counts: Mapping[int, int]) -> str | None:
    """Which other sweeps measured the results a sweep reused (``counts``: how many by
    sweep id, see :func:`~.database.measured_by_others`), or None when none."""
    if not counts:
        return None
    total = sum(counts.values())
    if len(counts) == 1:
        (sweep_id,) = counts
        plural = "s" if total > 1 else ""
        return (
            f"reused {total} result{plural} measured by sweep {sweep_id} (shown with its numbers)"
        )
    sources = ", ".join(f"{n} by sweep {sweep_id}" for sweep_id, n in counts.items())
    return f"reused {total} results measured by other sweeps ({sources}; shown with their numbers)"


def label(
    result: Result | None,
    names: Sequence[str],
    ignored: Mapping[tuple[Any, ...], tuple[str, ...]] | None = None,
) -> str:
    """A candidate by the swept parameters its build reads: ``TM=32, TN=128``."""
    if result is None:
        return "?"
    skip = ignored_by(result, names, ignored)
    shown = [f"{n}={result.params.get(n)}" for n in names if n not in skip]
    return ", ".join(shown) or result.key[:12]


def decision_line(
    decision: Decision | None,
    results: Sequence[Result],
    names: Sequence[str],
    ignored: Mapping[tuple[Any, ...], tuple[str, ...]] | None = None,
) -> str:
    """How the best was picked, for people (or why there is no race to show)."""
    if decision is None:
        return "no race was run: the best is a screening measurement ('sweep --resume' races)"
    by_key = {r.key: r for r in results}
    return "race: " + decision.describe(lambda key: label(by_key.get(key), names, ignored))


def result_json(
    result: Result,
    decision: Decision | None,
    names: Sequence[str] = (),
    ignored: Mapping[tuple[Any, ...], tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """A result as JSON, with its standing in the sweep's race (``race``: place, speedup
    ``[median, low, high]``, rounds, eliminated_after, behind_leader; None if it did not
    race) and the swept parameters its build ignores (``ignored``, see
    :func:`ranked_table`)."""
    standing = decision.standing(result.key) if decision else None
    return {
        **result.as_dict(),
        "race": standing.as_dict() if standing else None,
        "ignored": list(ignored_by(result, names, ignored)),
    }


def ignored_by(
    result: Result,
    names: Sequence[str],
    ignored: Mapping[tuple[Any, ...], tuple[str, ...]] | None,
) -> tuple[str, ...]:
    """The swept parameters ``result``'s build does not read: ``ignored`` by the point its
    parameters (``names``, in order) make; none when unknown."""
    if not ignored:
        return ()
    return ignored.get(tuple(result.params.get(n) for n in names), ())


def _value(
    result: Result,
    name: str,
    names: Sequence[str],
    ignored: Mapping[tuple[Any, ...], tuple[str, ...]] | None,
) -> str:
    """The candidate's value of ``name`` for the table: ``-`` where its build ignores it."""
    return "-" if name in ignored_by(result, names, ignored) else str(result.params.get(name, ""))


def decision_json(
    decision: Decision | None, results: Sequence[Result], names: Sequence[str]
) -> dict[str, Any] | None:
    """The race as JSON: verdict, rounds, seconds, margin, standings, left_out,
    screening_s, and the ``text`` people read."""
    if decision is None:
        return None
    return {**decision.as_dict(), "text": decision_line(decision, results, names)}
