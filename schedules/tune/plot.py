"""``tdsched tune --plot PNG``: what a tune did, end to end and per task.

Left, the model's estimated speedup over IREE default after every round, against the
budget spent (over every run into the folder, from the tune's history): a step for each
round that found a faster candidate. It starts at what the model rewrites gave IREE's own
pipeline, and a dashed line marks the speedup the final run measured, when there was one.
Right, the tasks with the most time: each task's time per call in IREE default's profile
(grey) against its time at its best speedup where it kept a schedule (coloured), the same
where it kept IREE's pipeline; the last bar is the rest of IREE default's call, the time
outside every task's dispatches (the runtime between them), which no kernel schedule
shortens.

Needs matplotlib (the optional extra ``tdsched[plot]``), imported only when plotting.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..measure.roofline_plot import require_matplotlib
from .outcome import TuneOutcome

if TYPE_CHECKING:
    from matplotlib.axes import Axes

MOST_TASKS = 12
"""Tasks drawn on the right, most time first (a ResNet has about 40)."""
_GREY = "0.7"
_KEPT = "tab:blue"
_MEASURED = "tab:green"


def plot_tune(outcome: TuneOutcome, measured: float | None, path: Path, title: str) -> None:
    """Write the chart of ``outcome`` to ``path`` (PNG) under ``title``; ``measured`` is
    the final run's speedup over IREE default (``None``: not run)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13.0, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    progress, tasks = fig.subplots(1, 2, width_ratios=[1.0, 1.25])
    _progress(progress, outcome, measured)
    _tasks(tasks, outcome)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def _progress(ax: Axes, outcome: TuneOutcome, measured: float | None) -> None:
    rounds = [h for h in outcome.history if h.get("estimate") is not None]
    minutes = [0.0] + [float(h["spent_s"]) / 60 for h in rounds]
    estimates = [outcome.graph_speedup] + [float(h["estimate"]) for h in rounds]
    ax.step(minutes, estimates, where="post", color=_KEPT, label="estimate from the tasks")
    ax.plot(minutes[1:], estimates[1:], "o", color=_KEPT, markersize=3)
    ax.axhline(1.0, color=_GREY, linewidth=1, label="IREE default")
    if outcome.graph_speedup != 1.0:
        ax.annotate(
            f"model rewrites {outcome.graph_speedup:.2f}x",
            (0, outcome.graph_speedup),
            xytext=(4, 6),
            textcoords="offset points",
            fontsize=8,
        )
    if measured is not None:
        ax.axhline(measured, color=_MEASURED, linestyle="--", label=f"final run: {measured:.2f}x")
    top = max([*estimates, measured or 1.0])
    ax.set_ylim(0, top * 1.15)
    ax.set_xlim(0, max(minutes[-1], outcome.spent_s / 60) or 1.0)
    ax.set_xlabel("budget spent (minutes, every run into the folder)")
    ax.set_ylabel("model speedup vs IREE default")
    ax.set_title(f"{len(rounds)} rounds", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)


def _tasks(ax: Axes, outcome: TuneOutcome) -> None:
    timed = [t for t in outcome.tunings if t.task.time_ms]
    shown = sorted(timed, key=lambda t: -(t.task.time_ms or 0.0))[:MOST_TASKS]
    if not shown:
        ax.text(0.5, 0.5, "no profile of IREE default", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    call = outcome.tasks.call_ms.median if outcome.tasks.call_ms else 0.0
    rest = call - sum(t.task.time_ms or 0.0 for t in timed)
    rows = list(range(1, len(shown) + 1))[::-1]
    before = [t.task.time_ms or 0.0 for t in shown]
    if rest > 0:
        ax.barh([0], [rest], height=0.4, color=_GREY, hatch="//", edgecolor="white")
    after = [ms / (t.speedup or 1.0) if t.won else ms for t, ms in zip(shown, before, strict=True)]
    ax.barh([r + 0.2 for r in rows], before, height=0.4, color=_GREY, label="IREE default")
    colours = [_KEPT if t.won else _GREY for t in shown]
    ax.barh([r - 0.2 for r in rows], after, height=0.4, color=colours, label="tuned")
    for row, tuning, ms in zip(rows, shown, after, strict=True):
        text = f"{tuning.speedup:.2f}x" if tuning.won and tuning.speedup else "IREE's pipeline"
        ax.annotate(
            text,
            (ms, row - 0.2),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    labels = [f"{t.task.name} {t.task.root.describe()}" for t in shown]
    ax.set_yticks([*rows, 0], [*labels, "rest of the call (outside the tasks)"], fontsize=7)
    ax.set_xlim(0, max([*before, rest]) * 1.25)
    ax.set_xlabel("time per call in the model (ms)")
    left = len(timed) - len(shown)
    more = f" ({left} smaller not shown)" if left > 0 else ""
    ax.set_title(f"tasks, most time first{more}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
