"""``tdsched regress history``: each recorded series' change points, as text or JSON.

A series is one entry on one machine (:func:`.history.read_series`); only runs that
measured it (pass, regressed, blessed, inconclusive: a speedup was timed) are points of it.
A series *has regressed* when its last change is a regression (nothing after it brought
the speedup back) with a commit between its runs, and, with ``since``, that change came
after the given run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .change_points import Change, Settings, change_points
from .history import Point, read_series


@dataclass(frozen=True)
class SeriesReport:
    """One entry on one machine: its points and their change points."""

    entry: str
    machine: str
    points: list[Point]
    changes: list[Change]

    def regressed_since(self, since: str | None) -> Change | None:
        """The last change when it is a regression after ``since`` (a date ``YYYY-MM-DD``
        or the prefix of a recorded commit; None: any), else None. A change with no commit
        between its runs is the machine's, never a regression of the code."""
        if not self.changes or not self.changes[-1].is_regression:
            return None
        last = self.changes[-1]
        if _same_commit(self.points, last):
            return None
        if since is None or _after(self.points, last.index, since):
            return last
        return None

    def as_dict(self, since: str | None) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "machine": self.machine,
            "runs": len(self.points),
            "series": [
                {
                    "run": p.run.id,
                    "recorded": p.run.recorded,
                    "commit": p.run.git_commit,
                    "median": p.median,
                    "low": p.low,
                    "high": p.high,
                }
                for p in self.points
            ],
            "changes": [_change_dict(self.points, c) for c in self.changes],
            "regressed": self.regressed_since(since) is not None,
        }


def analyse(
    path: Path,
    entries: Sequence[str] = (),
    machine: str | None = None,
    settings: Settings | None = None,
) -> list[SeriesReport]:
    """The change points of every series in the history at ``path`` whose entry label
    contains one of ``entries`` (all when empty) and whose machine contains ``machine``."""
    reports = []
    for (entry, on), points in sorted(read_series(path).items()):
        if entries and not any(text in entry for text in entries):
            continue
        if machine is not None and machine not in on:
            continue
        timed = [p for p in points if p.median is not None and p.median > 0]
        changes = change_points([p.median for p in timed if p.median], settings or Settings())
        reports.append(SeriesReport(entry, on, timed, changes))
    return reports


def change_line(points: Sequence[Point], change: Change) -> str:
    """``run 36 (2026-11-28, commit 1a2b..3c4d): 0.970x -> 0.929x (-4.2%, p=3e-09), a
    regression``: the change, between the last run before it and the first after."""
    last, first = points[change.index - 1].run, points[change.index].run
    between = f"run {first.id} ({first.recorded[:10]}"
    if first.git_commit:
        between += f", commit {last.git_commit or '?'}..{first.git_commit}"
    what = "a regression" if change.is_regression else "an improvement"
    line = (
        f"{between}): {change.before:.3f}x -> {change.after:.3f}x ({change.relative:+.1%}, "
        f"p={change.p_value:.1g}), {what}"
    )
    if _same_commit(points, change):
        line += " with no commit between the runs: the machine changed, not the code"
    return line


def _same_commit(points: Sequence[Point], change: Change) -> bool:
    """Whether the runs on both sides of ``change`` were recorded at one commit (with no
    uncommitted changes: a ``+`` commit may differ)."""
    last, first = points[change.index - 1].run.git_commit, points[change.index].run.git_commit
    return last is not None and last == first and not last.endswith("+")


def text(reports: Sequence[SeriesReport], path: Path, since: str | None) -> str:
    """The report as lines: a header per series, a line per change."""
    runs = {p.run.id for r in reports for p in r.points}
    lines = [
        f"history  {path}: {_count(len(runs), 'run')}, {len(reports)} series (entry on machine)"
    ]
    for report in reports:
        count = len(report.changes)
        lines.append(
            f"series   {report.entry} on {report.machine}: {_count(len(report.points), 'run')}, "
            f"{count} change{'' if count == 1 else 's'}"
            + (", REGRESSED" if report.regressed_since(since) else "")
        )
        lines += [f"  change at {change_line(report.points, c)}" for c in report.changes]
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _change_dict(points: Sequence[Point], change: Change) -> dict[str, Any]:
    last, first = points[change.index - 1].run, points[change.index].run
    return {
        "run": first.id,
        "recorded": first.recorded,
        "commits": [last.git_commit, first.git_commit],
        "before": change.before,
        "after": change.after,
        "relative": change.relative,
        "p_value": change.p_value,
        "regression": change.is_regression,
        "same_commit": _same_commit(points, change),
    }


def check_since(since: str, reports: Sequence[SeriesReport]) -> None:
    """Raise a ValueError unless ``since`` is a date or a commit some run was recorded at."""
    commits = {p.run.git_commit or "" for r in reports for p in r.points}
    if not _is_date(since) and not any(c.startswith(since) for c in commits):
        raise ValueError(
            f"--since {since}: no run of the history was recorded at a commit starting with "
            "it; give a recorded commit or a date YYYY-MM-DD"
        )


def _is_date(text: str) -> bool:
    return len(text) == 10 and text[4] == "-" and text[7] == "-"


def _after(points: Sequence[Point], index: int, since: str) -> bool:
    """Whether the run at ``index`` comes after the run ``since`` names (a date, or a
    commit prefix; a commit this series never ran at: every run is after it)."""
    if _is_date(since):
        return points[index].run.recorded[:10] > since
    named = [i for i, p in enumerate(points) if (p.run.git_commit or "").startswith(since)]
    return not named or index > named[-1]
