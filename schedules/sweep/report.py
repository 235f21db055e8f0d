"""What ``tdsched report`` shows about a recorded sweep: text, CSV, JSON and plots.

Pure functions over what :class:`~tdsched.schedules.sweep.database.ResultsDB` returns (a
:class:`Sweep`, its results, its baselines), bundled as :class:`SweepData`; reading the
database is :mod:`tdsched.schedules.cli.report_command`'s job. Ranking is the sweep's own
(:func:`~tdsched.schedules.sweep.runner.rank`) and so is the table
(:func:`~tdsched.schedules.sweep.table.ranked_table`), so a report prints what the sweep
printed when it ended.

Plots need matplotlib (the optional extra ``tdsched[plot]``); it is imported only when a
plot is asked for, and drawn with the Agg backend (no display needed).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tdsched.targets.racing import Decision

from ..base.text_table import aligned
from .database import Result, Sweep, drift, measured_by_others
from .runner import rank
from .table import (
    baseline_line,
    decision_json,
    decision_line,
    ranked_table,
    result_json,
    reuse_line,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RESULT_COLUMNS = (
    "time_ms",
    "baseline_ms",
    "speedup",
    "speedup_low",
    "speedup_high",
    "confirmed_speedup",
    "max_abs_error",
    "compile_s",
    "error",
)
"""CSV columns after ``key``, ``status`` and one column per parameter."""


class ReportError(ValueError):
    """A report cannot be made as asked (missing database, unknown sweep or parameter)."""


@dataclass(frozen=True)
class SweepData:
    """One recorded sweep: its row, the results it evaluated (in recorded order) and
    IREE default's median at the ``start`` and ``end`` of it."""

    sweep: Sweep
    results: list[Result]
    baselines: dict[str, float]
    bundle: dict[str, Any] | None = None
    """The bench bundle the sweep wrote (``sweep --bundle``), with the device its results
    were measured on once imported; None for a sweep timed here."""

    @property
    def decision(self) -> Decision | None:
        """The race that picked the sweep's best (None before it ran)."""
        recorded = self.sweep.decision
        return Decision.from_dict(recorded) if recorded else None

    @property
    def ranked(self) -> list[Result]:
        return rank(self.results, self.decision)

    @property
    def best_speedup(self) -> float | None:
        """The best candidate's speedup: raced when it raced, else screened."""
        ranked = self.ranked
        if not ranked:
            return None
        decision = self.decision
        standing = decision.standing(ranked[0].key) if decision else None
        return standing.speedup.median if standing else ranked[0].speedup

    @property
    def default_gflops(self) -> float | None:
        """IREE default's GFLOP/s at its median at the end of the sweep (at the start
        when it has no end); ``None`` without recorded work."""
        work = self.sweep.work
        end = self.baselines.get("end") or self.baselines.get("start")
        return work.gflops(end) if work is not None else None

    @property
    def best_gflops(self) -> float | None:
        """The best candidate's GFLOP/s: IREE default's times :attr:`best_speedup` (the
        figure the table ranks by, raced when it raced)."""
        default, best = self.default_gflops, self.best_speedup
        return default * best if default is not None and best is not None else None

    @property
    def failed(self) -> list[Result]:
        return [r for r in self.results if not r.ok]

    @property
    def ignored(self) -> dict[tuple[Any, ...], tuple[str, ...]]:
        """The swept parameters each candidate's build ignores, by point
        (:attr:`~tdsched.schedules.dsl.space.Enumeration.ignored`, recorded with the
        space; empty for sweeps recorded before it was)."""
        return {
            tuple(entry["point"]): tuple(entry["names"])
            for entry in self.sweep.space.get("ignored", [])
        }

    @property
    def names(self) -> list[str]:
        """The swept parameters, in the space's order."""
        return [str(n) for n in self.sweep.space.get("names", [])]

    @property
    def param_names(self) -> list[str]:
        """The swept parameters, then the others the results record (those fixed with
        ``--param``, in the order first seen)."""
        names = self.names
        for r in self.results:
            names += [k for k in r.params if k not in names]
        return names

    @property
    def reused_from(self) -> dict[int, int]:
        """How many of its results each other sweep measured (the sweep reused them)."""
        return measured_by_others(self.results, self.sweep.id)

    @property
    def drift(self) -> float | None:
        """Relative change of IREE default's median from the start to the end."""
        return drift(self.baselines)

    @property
    def title(self) -> str:
        s = self.sweep
        return f"sweep {s.id}: {s.recipe} on {s.conditions} ({s.method})"


def _when(stamp: float | None) -> str:
    return "-" if stamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _pruned(space: dict[str, Any]) -> list[tuple[str, int]]:
    return [(str(reason), int(count)) for reason, count in space.get("pruned", [])]


def header_lines(data: SweepData) -> list[str]:
    """Sweep metadata: recipe, target, strategy, times, status, space, baselines."""
    s = data.sweep
    status = s.status
    bundle = data.bundle
    if status == "running" and bundle is not None:
        status += (
            f" (its bench bundle {bundle['folder']} waits to be run on the device and its "
            "results imported: 'tdsched sweep ... --import RESULTS', docs/commands/bench.md)"
        )
    elif status == "running":
        status += " (still running, or interrupted: 'tdsched sweep --resume' continues it)"
    lines = [f"{data.title}, {status}"]
    if s.source:
        lines.append(f"recipe    {s.source}")
    fixed = s.options.get("fixed") or {}
    if fixed:
        lines.append("fixed     " + ", ".join(f"{k}={v}" for k, v in fixed.items()))
    took = f" ({s.finished - s.started:.1f} s)" if s.finished is not None else ""
    lines.append(f"started   {_when(s.started)}, finished {_when(s.finished)}{took}")
    space = s.space
    pruned = "; ".join(f"pruned {n} by {reason}" for reason, n in _pruned(space))
    lines.append(
        f"space     {space.get('total', '?')} candidates ({' x '.join(data.names)}), "
        f"{space.get('valid', '?')} valid" + (f"; {pruned}" if pruned else "")
    )
    kinds: dict[str, int] = {}
    for r in data.failed:
        kinds[r.status] = kinds.get(r.status, 0) + 1
    failures = ", ".join(f"{n} {status}" for status, n in sorted(kinds.items()))
    lines.append(
        f"evaluated {len(data.results)}: {len(data.ranked)} correct, {len(data.failed)} failed"
        + (f" ({failures})" if failures else "")
    )
    reused = reuse_line(data.reused_from)
    if reused is not None:
        lines.append(reused)
    if bundle is not None and bundle.get("device"):
        device = bundle["device"]
        on = f"{device['device']}, host CPU {device['cpu']}" if device["device"] else device["cpu"]
        lines.append(f"device    {device['driver']} ({on}), by the bench bundle {bundle['folder']}")
    lines.append(baseline_line(data.baselines))
    work = work_line(data)
    if work is not None:
        lines.append(work)
    return lines


def work_line(data: SweepData) -> str | None:
    """The workload's work and traffic, and the GFLOP/s of IREE default (at the end) and
    of the best candidate (:attr:`SweepData.best_gflops`); ``None`` for a sweep recorded
    without work."""
    work = data.sweep.work
    if work is None:
        return None
    bound = " (a lower bound)" if work.uncounted else ""
    line = f"work      {work.flops / 1e9:.4g} GFLOP{bound}, "
    line += f"{work.traffic_bytes / 1e6:.4g} MB in+out"
    if work.intensity is not None:
        line += f", {work.intensity:.3g} FLOP/byte"
    best, default = data.best_gflops, data.default_gflops
    if best is not None and default is not None:
        line += f"; best {best:.1f} GFLOP/s, IREE default {default:.1f} GFLOP/s"
    return line


def text_report(data: SweepData, top: int) -> str:
    """The header, then the ranked table of the best ``top`` and the failures."""
    table = ranked_table(data.ranked, data.failed, data.names, top, data.decision, data.ignored)
    lines = [*header_lines(data), "", table]
    if data.ranked:
        lines.append(decision_line(data.decision, data.results, data.names, data.ignored))
    return "\n".join(lines)


def summary(data: SweepData) -> dict[str, Any]:
    """One sweep in brief, for ``--all``: what ran and the best it found."""
    s = data.sweep
    return {
        "sweep": s.id,
        "recipe": s.recipe,
        "target": s.target,
        "strategy": s.strategy,
        "status": s.status,
        "started": s.started,
        "evaluated": len(data.results),
        "best_speedup": data.best_speedup,
    }


def sweeps_table(sweeps: Sequence[SweepData]) -> str:
    """A line per sweep: id, recipe, target, strategy, status, evaluated, best speedup."""
    header = ["id", "recipe", "target", "strategy", "status", "started", "evaluated", "best"]
    rows = [header]
    for data in sweeps:
        s = summary(data)
        best = s["best_speedup"]
        rows.append(
            [
                str(s["sweep"]),
                s["recipe"],
                s["target"],
                s["strategy"],
                s["status"],
                _when(s["started"]),
                str(s["evaluated"]),
                "-" if best is None else f"{best:.3f}x",
            ]
        )
    return "\n".join(aligned(rows))


def write_csv(data: SweepData, stream: TextIO) -> None:
    """One row per result, in recorded order (the scatter plot's candidate index):
    ``key``, ``status``, each parameter, then :data:`RESULT_COLUMNS`; empty when unknown."""
    names = data.param_names
    writer = csv.writer(stream)
    writer.writerow(["key", "status", *names, *RESULT_COLUMNS])
    for r in data.results:
        row = r.as_dict()
        writer.writerow(
            [
                r.key,
                r.status,
                *(r.params.get(n, "") for n in names),
                *(row[c] for c in RESULT_COLUMNS),
            ]
        )


def as_json(data: SweepData) -> dict[str, Any]:
    """The sweep's metadata, baselines, and its ranked and failed results."""
    s = data.sweep
    ranked = data.ranked
    return {
        "sweep": s.id,
        "recipe": s.recipe,
        "source": s.source,
        "target": s.target,
        "strategy": s.strategy,
        "status": s.status,
        "started": s.started,
        "finished": s.finished,
        "options": s.options,
        "space": {
            "parameters": data.names,
            "total": s.space.get("total"),
            "valid": s.space.get("valid"),
            "pruned": [{"reason": r, "count": n} for r, n in _pruned(s.space)],
        },
        "evaluated": len(data.results),
        "baseline_ms": data.baselines,
        "drift": data.drift,
        "reused_from": {str(sweep): n for sweep, n in data.reused_from.items()},
        "work": s.work.as_dict() if s.work else None,
        "bundle": data.bundle,
        "ranked": [result_json(r, data.decision, data.names, data.ignored) for r in ranked],
        "failed": [r.as_dict() for r in data.failed],
        "best": result_json(ranked[0], data.decision, data.names, data.ignored) if ranked else None,
        "decision": decision_json(data.decision, data.results, data.names),
    }


# -- plots -----------------------------------------------------------------------------


def check_parameter(data: SweepData, name: str | None, option: str) -> None:
    """Raise :class:`ReportError` unless ``name`` (given to ``option``) was swept."""
    if name is not None and name not in data.names:
        raise ReportError(
            f"{option} {name}: not a parameter of sweep {data.sweep.id}; "
            f"it swept {', '.join(data.names) or 'nothing'}"
        )


def _order(value: Any) -> tuple[int, float, str]:
    """Numbers by value, then anything else by text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _values(results: Sequence[Result], name: str) -> list[Any]:
    """The values ``name`` took among ``results``, in order."""
    return sorted({r.params[name] for r in results if name in r.params}, key=_order)


def plot(data: SweepData, path: Path, x: str | None = None, y: str | None = None) -> None:
    """Write a PNG: with ``x`` and ``y`` a heatmap of the best sweep speedup per (x, y);
    otherwise a scatter of every candidate's speedup against ``x`` (or its index).

    Speedups are the sweep's own measurements (``speedup``): every candidate was timed
    the same way, so cells and points compare; the confirmation round's are in the table.
    """
    check_parameter(data, x, "--x")
    check_parameter(data, y, "--y")
    if y is not None and x is None:
        raise ReportError("--y needs --x (a heatmap plots speedup over --x and --y)")
    if x is not None and x == y:
        raise ReportError(f"--x and --y are both {x}; a heatmap needs two parameters")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ReportError(
            f"--plot needs matplotlib ({exc}): install tdsched[plot] (pip install 'tdsched[plot]')"
        ) from exc
    fig = Figure(figsize=(7.0, 5.0), layout="constrained")
    FigureCanvasAgg(fig)
    if x is not None and y is not None:
        _heatmap(fig, data, x, y)
    else:
        _scatter(fig, data, x)
    fig.savefig(path, format="png", dpi=110)


def best_cells(
    results: Sequence[Result], x: str, y: str, *, raced: bool = False
) -> dict[tuple[Any, Any], float | None]:
    """Per evaluated (x value, y value): the best screening speedup of the correct
    candidates there, whatever the other parameters (with ``raced``, the best speedup
    measured in the race, of those that raced); None where no candidate has one."""
    cells: dict[tuple[Any, Any], float | None] = {}
    for r in results:
        cell = (r.params.get(x), r.params.get(y))
        best = cells.get(cell)
        value = r.confirmed_speedup if raced else r.speedup
        if r.ok and value is not None and (best is None or value > best):
            best = value
        cells[cell] = best
    return cells


def _heatmap(fig: Figure, data: SweepData, x: str, y: str) -> None:
    xs, ys = _values(data.results, x), _values(data.results, y)
    cells = best_cells(data.results, x, y)
    raced = best_cells(data.results, x, y, raced=True)
    grid = [[cells.get((xv, yv)) or float("nan") for xv in xs] for yv in ys]
    fig.set_size_inches(max(6.0, 0.8 * len(xs) + 2.5), max(4.0, 0.6 * len(ys) + 2.0))
    ax = fig.add_subplot()
    norm = centred_norm([v for v in cells.values() if v is not None])
    image = ax.imshow(grid, origin="lower", cmap="RdBu", norm=norm, aspect="auto")
    fig.colorbar(image, ax=ax, label="speedup vs IREE default (white: 1.0, as fast)")
    for i, yv in enumerate(ys):
        for j, xv in enumerate(xs):
            value = cells.get((xv, yv))
            if value is not None:
                dark = abs(float(norm(value)) - 0.5) > 0.3
                race = raced.get((xv, yv))
                ax.text(
                    j,
                    i,
                    f"{value:.2f}" + (f"\nrace {race:.2f}" if race is not None else ""),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if dark else "black",
                )
            elif (xv, yv) in cells:
                ax.text(j, i, "failed", ha="center", va="center", fontsize=7, color="0.4")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(
        f"{data.title}\nbest screening speedup over the other parameters\n"
        "'race': the best race speedup there; blank: not evaluated",
        fontsize=10,
    )


def centred_norm(values: Sequence[float]) -> Any:
    """A colour scale with IREE default's speed (1.0) at its centre, so blue reads
    faster and red slower whatever the range, symmetric in ratio (TwoSlopeNorm; needs
    matplotlib)."""
    from matplotlib.colors import TwoSlopeNorm

    low = min([*values, 0.99])
    high = max([*values, 1.01])
    # As far below 1.0 as above (in ratio), so 2x faster and 2x slower look as strong.
    return TwoSlopeNorm(vcenter=1.0, vmin=min(low, 1.0 / high), vmax=max(high, 1.0 / low))


def interval_bars(
    results: Sequence[Result], position: dict[str, float]
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Error bars of the screening speedups that have a 95% interval: x, the median,
    and the distances down to the interval's low end and up to its high end."""
    xs, ys, below, above = [], [], [], []
    for r in results:
        if r.speedup is None or r.speedup_low is None or r.speedup_high is None:
            continue
        xs.append(position[r.key])
        ys.append(r.speedup)
        below.append(max(0.0, r.speedup - r.speedup_low))
        above.append(max(0.0, r.speedup_high - r.speedup))
    return xs, ys, below, above


def _scatter(fig: Figure, data: SweepData, x: str | None) -> None:
    ax = fig.add_subplot()
    if x is None:
        position = {r.key: float(i) for i, r in enumerate(data.results, start=1)}
        ax.set_xlabel("candidate (in recorded order)")
    else:
        values = _values(data.results, x)
        index = {v: float(i) for i, v in enumerate(values)}
        position = {r.key: index[r.params[x]] for r in data.results if x in r.params}
        ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlabel(x)
    good = [r for r in data.results if r.ok and r.speedup is not None and r.key in position]
    bad = [r for r in data.results if not r.ok and r.key in position]
    speedups = [r.speedup or 0.0 for r in good]
    low, high = min([1.0, *speedups]), max([1.0, *speedups])
    ax.scatter(
        [position[r.key] for r in good],
        speedups,
        s=28,
        alpha=0.7,
        color="tab:blue",
        label=f"correct ({len(good)}): screening median",
    )
    bars = interval_bars(good, position)
    if bars[0]:
        xs, ys, below, above = bars
        ax.errorbar(
            xs,
            ys,
            yerr=[below, above],
            fmt="none",
            ecolor="tab:blue",
            alpha=0.45,
            capsize=2,
            label="its 95% interval",
        )
        low = min([low, *(y - b for y, b in zip(ys, below, strict=True))])
        high = max([high, *(y + a for y, a in zip(ys, above, strict=True))])
    decision = data.decision
    standings = [(r, decision.standing(r.key)) for r in good] if decision else []
    raced = [(r, st) for r, st in standings if st is not None]
    if raced:
        ys = [st.speedup.median for _, st in raced]
        ax.errorbar(
            [position[r.key] + 0.15 for r, _ in raced],
            ys,
            yerr=[
                [max(0.0, st.speedup.median - st.speedup.low) for _, st in raced],
                [max(0.0, st.speedup.high - st.speedup.median) for _, st in raced],
            ],
            fmt="D",
            markersize=5,
            color="tab:orange",
            capsize=2,
            label=f"raced ({len(raced)}): race median, 95% interval",
        )
        low = min([low, *(st.speedup.low for _, st in raced)])
        high = max([high, *(st.speedup.high for _, st in raced)])
    pad = 0.08 * (high - low or 1.0)
    if bad:
        ax.scatter(
            [position[r.key] for r in bad],
            [low - pad] * len(bad),
            marker="x",
            s=40,
            color="tab:red",
            label=f"failed ({len(bad)}): no speedup",
        )
    ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1, label="IREE default (1.0)")
    ax.set_ylim(low - 2 * pad, high + pad)
    ax.set_ylabel("speedup vs IREE default")
    ax.set_title(data.title)
    ax.legend(loc="best")
