"""``tdsched report --roofline PNG``: a sweep's candidates on the machine's roofline.

The picture of ``tdsched run --profile --plot`` (:mod:`tdsched.schedules.measure.roofline_plot`),
for sweeps: log-log, arithmetic intensity (the workload's FLOP per byte of compulsory
traffic, :class:`~.database.SweepWork`) against GFLOP/s, under the roof of the machine's
measured FMA peak and bandwidth. Every candidate of one sweep computes the same workload,
so they share its intensity: a sweep is a column, and how high its candidates reach says
how much of the machine the space can use. Sweeps of one recipe over several shapes (a
shape table) stand side by side at their own intensities.

Per sweep, in one colour:

* each correct candidate: a dot at its screening median, with its 95% interval;
* each raced candidate: a diamond at IREE default's GFLOP/s (its median at the end of the
  sweep) times the candidate's race speedup, with the race's interval: the race compares
  candidates and IREE default round by round, so it is the figure to trust;
* the best (the sweep's rank 1): a star at IREE default's GFLOP/s times its speedup
  (raced when it raced: the header's ``best`` figure), labelled with its parameters and
  its share of the FMA peak;
* IREE default: hollow squares at its medians at the start and at the end of the sweep.

Sweeps sharing an intensity are spread a little sideways so that their columns do not
hide each other. Failed candidates have no time: the legend counts them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..measure.machine_peak import MachinePeak
from ..measure.roofline_plot import (
    draw_roof,
    label_bandwidth_roof,
    log_axes,
    marker_boxes,
    place_label,
    require_matplotlib,
)
from .database import Result, SweepWork
from .report import SweepData

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

_SPREAD = 1.12
"""Sideways factor between sweeps drawn at one intensity (on the log x axis)."""
_LABEL_OFFSETS = [(9, 0), (-9, 0), (9, 22), (-9, 22), (9, -22), (-9, -22), (9, 44), (-9, 44)]
"""Where a best candidate's label may go, in points from its star: tried in order."""
_RACE_SHIFT = 1.035
"""Race diamonds sit this factor right of their candidate's screening dot."""


@dataclass(frozen=True)
class _Column:
    """One sweep's points: where they go on x, and its work."""

    data: SweepData
    work: SweepWork
    x: float


def plot_sweep_roofline(
    sweeps: Sequence[SweepData], peak: MachinePeak | None, path: Path, note: str | None = None
) -> None:
    """Write the roofline of ``sweeps`` (each with recorded work and FLOP) to ``path``.

    ``peak``: the roof, ``None`` to draw none (the sweeps ran on another machine);
    ``note``: a line written under the plot (why the roof or a sweep is missing).
    Precondition: matplotlib is installed (:func:`~..roofline_plot.require_matplotlib`).
    """
    require_matplotlib()
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    log_axes(ax, "arithmetic intensity (FLOP per byte: inputs read once, outputs written once)")
    columns = _columns(sweeps)
    colours = [style["color"] for style in rcParams["axes.prop_cycle"]]
    _limits(ax, columns, peak)
    if peak is not None:
        draw_roof(ax, peak)
    drawn: list[tuple[float, float]] = []
    labels: list[tuple[str, tuple[float, float], str]] = []
    for index, column in enumerate(columns):
        colour = colours[index % len(colours)]
        drawn += _column(ax, column, colour)
        best = _best(ax, column, colour, peak)
        if best is not None:
            labels.append((*best, colour))
            drawn.append(best[1])
    conditions = sorted({c.data.sweep.conditions for c in columns})
    ax.set_title(
        columns[0].data.title
        if len(columns) == 1
        else f"{len(columns)} sweeps on " + ", ".join(conditions)
    )
    ax.grid(True, which="major", alpha=0.3)
    if note:
        ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=8)
    handles, _ = ax.get_legend_handles_labels()
    fig.legend(
        handles=[*_marker_legend(), *handles],
        loc="outside lower center",
        ncols=2,
        fontsize=8,
        frameon=False,
    )
    fig.draw_without_rendering()  # lay the figure out: labels go by display coordinates
    if peak is not None:
        label_bandwidth_roof(ax, peak)
    taken = marker_boxes(ax, drawn)
    for text, xy, colour in labels:
        place_label(ax, text, xy, taken, _LABEL_OFFSETS, fontsize=8, color=colour, va="center")
    fig.savefig(path, format="png", dpi=110)


def _columns(sweeps: Sequence[SweepData]) -> list[_Column]:
    """Each sweep's x: its intensity, spread sideways among sweeps at the same one."""
    at: dict[float, list[tuple[SweepData, SweepWork]]] = {}
    for data in sweeps:
        work = data.sweep.work
        assert work is not None and work.intensity is not None
        at.setdefault(round(math.log10(work.intensity), 2), []).append((data, work))
    columns = []
    for group in at.values():
        for index, (data, work) in enumerate(group):
            assert work.intensity is not None
            spread = _SPREAD ** (index - (len(group) - 1) / 2)
            columns.append(_Column(data, work, work.intensity * spread))
    return sorted(columns, key=lambda c: c.data.sweep.id)


def _gflops_points(column: _Column) -> list[float]:
    """Every GFLOP/s the column draws: candidates, race intervals, IREE default."""
    values = [g for r in column.data.ranked for g in _screened(column.work, r)]
    decision = column.data.decision
    default = column.data.default_gflops
    if decision is not None and default is not None:
        for standing in decision.race.standings:
            values += [default * standing.speedup.low, default * standing.speedup.high]
    values += [g for g in (column.work.gflops(ms) for ms in column.data.baselines.values()) if g]
    return values


def _limits(ax: Axes, columns: Sequence[_Column], peak: MachinePeak | None) -> None:
    """Axes that hold every point, the ridge and the roof above them, with a margin."""
    xs = [c.x for c in columns]
    ys = [g for c in columns for g in _gflops_points(c)] or [1.0]
    if peak is not None:
        xs.append(peak.fma_gflops / peak.bandwidth_gbps)
        ys.append(peak.fma_gflops)
    ax.set_xlim(min(xs) / 4, max(xs) * 4)
    ax.set_ylim(min(ys) / 4, max(ys) * 2)


def _screened(work: SweepWork, result: Result) -> list[float]:
    """A candidate's screening GFLOP/s: the median, then its 95% interval's low and high
    ends (the speedup interval scaled to the median), or the median alone."""
    median = work.gflops(result.time_ms)
    if median is None:
        return []
    if result.speedup and result.speedup_low and result.speedup_high:
        scale = median / result.speedup
        return [median, result.speedup_low * scale, result.speedup_high * scale]
    return [median]


def _marker_legend() -> list[Line2D]:
    """Legend entries for the marker kinds, in grey (the colours name the sweeps)."""
    from matplotlib.lines import Line2D

    def entry(marker: str, label: str, **style: object) -> Line2D:
        return Line2D([], [], linestyle="none", marker=marker, label=label, **style)  # type: ignore[arg-type]

    grey = "0.45"
    return [
        entry("o", "candidate: screening median, 95% interval", color=grey, markersize=5),
        entry("D", "raced: IREE default x race speedup, 95% interval", color=grey),
        entry("*", "best (rank 1)", color=grey, markersize=12),
        entry("s", "IREE default (start and end of the sweep)", color=grey, fillstyle="none"),
    ]


def _column(ax: Axes, column: _Column, colour: str) -> list[tuple[float, float]]:
    """One sweep's candidates, race and IREE default, in ``colour``; returns where its
    markers are."""
    data, work, x = column.data, column.work, column.x
    ranked = data.ranked
    screened = [(r, _screened(work, r)) for r in ranked]
    screened = [(r, g) for r, g in screened if g]
    failed = f", {len(data.failed)} failed" if data.failed else ""
    bound = ", FLOP a lower bound" if work.uncounted else ""
    ax.errorbar(
        [x] * len(screened),
        [g[0] for _, g in screened],
        yerr=[
            [g[0] - g[1] if len(g) == 3 else 0.0 for _, g in screened],
            [g[2] - g[0] if len(g) == 3 else 0.0 for _, g in screened],
        ],
        fmt="o",
        markersize=4,
        color=colour,
        alpha=0.6,
        capsize=2,
        label=f"{_name(data)}: {len(screened)} correct{failed}{bound}",
    )
    default = column.data.default_gflops
    decision = data.decision
    if decision is not None and default is not None and decision.race.standings:
        raced = [s.speedup for s in decision.race.standings]
        ax.errorbar(
            [x * _RACE_SHIFT] * len(raced),
            [default * i.median for i in raced],
            yerr=[
                [default * (i.median - i.low) for i in raced],
                [default * (i.high - i.median) for i in raced],
            ],
            fmt="D",
            markersize=5,
            color=colour,
            capsize=2,
        )
    defaults = [g for g in (work.gflops(data.baselines.get(p)) for p in ("start", "end")) if g]
    ax.scatter(
        [x / _RACE_SHIFT] * len(defaults),
        defaults,
        marker="s",
        s=50,
        facecolors="none",
        edgecolors=colour,
        linewidths=1.5,
    )
    return [(x, g[0]) for _, g in screened] + [(x / _RACE_SHIFT, g) for g in defaults]


def _name(data: SweepData) -> str:
    """``sweep N: RECIPE (the parameters it fixed)``: what tells sweeps of a shape table
    apart."""
    fixed = data.sweep.options.get("fixed") or {}
    shape = " (" + ", ".join(f"{k}={v}" for k, v in fixed.items()) + ")" if fixed else ""
    return f"sweep {data.sweep.id}: {data.sweep.recipe}{shape}"


def _best(
    ax: Axes, column: _Column, colour: str, peak: MachinePeak | None
) -> tuple[str, tuple[float, float]] | None:
    """The rank-1 candidate: a star at :attr:`~.report.SweepData.best_gflops` (beside the
    race's diamonds when it raced); returns its label (parameters, GFLOP/s and share of
    the FMA peak) and where it is, or ``None`` when there is no best."""
    data = column.data
    gflops = data.best_gflops
    if gflops is None:
        return None
    best = data.ranked[0]
    raced = data.decision is not None and data.decision.standing(best.key) is not None
    xy = (column.x * _RACE_SHIFT if raced else column.x, gflops)
    ax.scatter(*xy, marker="*", s=160, color=colour, edgecolors="black", linewidths=0.5, zorder=3)
    params = ", ".join(f"{k}={best.params[k]}" for k in data.names if k in best.params)
    share = f", {gflops / peak.fma_gflops:.0%} of peak" if peak is not None else ""
    return f"{params}\n{gflops:.1f} GFLOP/s{share}", xy
