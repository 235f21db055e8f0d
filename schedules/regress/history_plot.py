"""``tdsched regress history --plot DIR``: one PNG per series.

Each chart shows the entry's recorded speedups over IREE default run after run (the
median, its 95% interval as a bar), the median of each stretch between change points as
a horizontal line, and a vertical line at each change (red: a regression, green: an
improvement). Needs matplotlib (the optional extra ``tdsched[plot]``).
"""

from __future__ import annotations

import hashlib
import re
import statistics
from pathlib import Path

from ..measure.roofline_plot import require_matplotlib
from .history_report import SeriesReport


def plot_file(report: SeriesReport) -> str:
    """The chart's file name: the entry's label made safe for a path, and a short digest
    of entry and machine (two machines' series of one entry get two files)."""
    stem = re.sub(r"[^A-Za-z0-9_.=,-]+", "_", report.entry).strip("_")[:80]
    digest = hashlib.sha256(f"{report.entry}\0{report.machine}".encode()).hexdigest()[:8]
    return f"{stem}.{digest}.png"


def plot_series(report: SeriesReport, folder: Path) -> Path:
    """Write ``report``'s chart into ``folder`` (created); its path."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    folder.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(10.0, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    points = report.points
    xs = [p.run.id for p in points]  # the run numbers the text report names
    medians = [p.median or 0.0 for p in points]
    below = [m - (p.low if p.low is not None else m) for m, p in zip(medians, points, strict=True)]
    above = [
        (p.high if p.high is not None else m) - m for m, p in zip(medians, points, strict=True)
    ]
    ax.errorbar(
        xs,
        medians,
        yerr=[below, above],
        fmt="o",
        markersize=3,
        color="tab:blue",
        ecolor="0.7",
        elinewidth=1,
        label="speedup (95% interval)",
    )
    bounds = [0, *(c.index for c in report.changes), len(points)]
    levels = [c.before for c in report.changes] + [
        report.changes[-1].after if report.changes else statistics.median(medians)
    ]
    for start, end, level in zip(bounds, bounds[1:], levels, strict=False):
        ax.hlines(level, xs[start] - 0.4, xs[end - 1] + 0.4, color="black", linewidth=1.5)
    for change in report.changes:
        colour = "tab:red" if change.is_regression else "tab:green"
        ax.axvline(
            (xs[change.index - 1] + xs[change.index]) / 2,
            color=colour,
            linestyle="--",
            label=f"{change.relative:+.1%} at run {points[change.index].run.id}",
        )
    ax.set_xlabel("recorded run")
    ax.set_ylabel("speedup vs IREE default")
    ax.set_title(f"{report.entry}\n{report.machine}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    path = folder / plot_file(report)
    fig.savefig(path, dpi=110)
    return path
