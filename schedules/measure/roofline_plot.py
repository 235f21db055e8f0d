"""``tdsched run --profile --plot PNG``: the dispatches of a profile on the machine's roofline.

Log-log: arithmetic intensity (FLOP per byte moved,
:mod:`tdsched.transform_lib.dispatch_work`) against GFLOP/s. The roof is the lower of the
measured FMA peak and the measured bandwidth times the intensity (:mod:`.machine_peak`).
Each pair of dispatches (:func:`~.profile_report.pair_dispatches`) has a colour: IREE
default's dispatch a hollow square, the schedule's a filled circle, an arrow from the
first to the second. The legend names each pair in full; on the plot a point carries only
its dispatch number, put where it overlaps no marker and no number placed before it.
Dispatches without FLOP (copies, packs) have no intensity: they are listed, not drawn.

Needs matplotlib (the optional extra ``tdsched[plot]``), imported only when plotting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .machine_peak import MachinePeak
from .profile_report import DispatchPair, DispatchProfile, DispatchRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.transforms import Bbox

INSTALL_HINT = "install tdsched[plot] (pip install 'tdsched[plot]')"
_GREY = "0.45"
_MARKER_SIZE = 55


class PlotError(ValueError):
    """A plot cannot be drawn (matplotlib missing); the message says what to do."""


def require_matplotlib() -> None:
    """Raise a PlotError naming the extra to install when matplotlib is missing (checked
    before a run that would end in a plot)."""
    try:
        import matplotlib.backends.backend_agg  # noqa: F401
    except ImportError as exc:
        raise PlotError(f"--plot needs matplotlib ({exc}): {INSTALL_HINT}") from exc


def plot_roofline(profile: DispatchProfile, path: Path, title: str) -> None:
    """Write the roofline of ``profile`` to ``path`` (PNG) under ``title``."""
    require_matplotlib()
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    log_axes(ax, "arithmetic intensity (FLOP per byte moved; each binding once)")
    points = [p for p in profile.pairs if _xy(p.baseline) or _xy(p.scheduled)]
    _limits(ax, profile, points)
    if profile.peak is not None:
        draw_roof(ax, profile.peak)
    colours = [style["color"] for style in rcParams["axes.prop_cycle"]]
    ax.scatter(
        [],
        [],
        marker="s",
        s=_MARKER_SIZE,
        facecolors="none",
        edgecolors=_GREY,
        label="IREE default",
    )
    ax.scatter([], [], marker="o", s=_MARKER_SIZE, color=_GREY, label="schedule")
    for index, pair in enumerate(points):
        _pair(ax, pair, colours[index % len(colours)])
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    unplotted = [p for p in profile.pairs if p not in points]
    if unplotted:
        names = ", ".join(_row(p).label for p in unplotted)
        ax.text(0.01, 0.01, f"no FLOP, not drawn: {names}", transform=ax.transAxes, fontsize=8)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    fig.draw_without_rendering()  # lay the figure out: labels go by display coordinates
    if profile.peak is not None:
        label_bandwidth_roof(ax, profile.peak)
    _number_points(ax, points)
    fig.savefig(path, format="png", dpi=110)


def _xy(row: DispatchRow | None) -> tuple[float, float] | None:
    """(FLOP per byte, GFLOP/s) of a dispatch with both, else ``None``."""
    if row is None or row.intensity is None or row.gflops is None:
        return None
    return row.intensity, row.gflops


def _row(pair: DispatchPair) -> DispatchRow:
    """The row that names a pair: the schedule's, or IREE default's when it stands alone."""
    row = pair.scheduled or pair.baseline
    assert row is not None
    return row


def _limits(ax: Axes, profile: DispatchProfile, points: Sequence[DispatchPair]) -> None:
    """Axes that hold every point, the ridge and the roof above them, with a margin."""
    xys = [xy for p in points for xy in (_xy(p.baseline), _xy(p.scheduled)) if xy]
    xs, ys = [x for x, _ in xys] or [1.0], [y for _, y in xys] or [1.0]
    peak = profile.peak
    if peak is not None:
        xs.append(peak.fma_gflops / peak.bandwidth_gbps)
        ys.append(peak.fma_gflops)
    ax.set_xlim(min(xs) / 4, max(xs) * 4)
    ax.set_ylim(min(ys) / 4, max(ys) * 2)


def log_axes(ax: Axes, xlabel: str) -> None:
    """Log-log axes of a roofline: ``xlabel`` (an intensity) against GFLOP/s, ticks at
    1, 2 and 5 of each decade written as plain numbers."""
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(StrMethodFormatter("{x:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GFLOP/s")


def draw_roof(ax: Axes, peak: MachinePeak) -> None:
    """The roof across the axes' x range (set it first): bandwidth times intensity up to
    the ridge, the FMA peak after it."""
    low, high = ax.get_xlim()
    ridge = peak.fma_gflops / peak.bandwidth_gbps
    ax.plot(
        [low, ridge, high],
        [peak.bandwidth_gbps * low, peak.fma_gflops, peak.fma_gflops],
        color="black",
        linewidth=1.5,
        label="roof: measured FMA peak and bandwidth",
    )
    ax.annotate(
        f"FMA peak {peak.fma_gflops:.0f} GFLOP/s",
        (high, peak.fma_gflops),
        xytext=(-4, 4),
        textcoords="offset points",
        ha="right",
        fontsize=8,
    )


def label_bandwidth_roof(ax: Axes, peak: MachinePeak) -> None:
    """Write the bandwidth along its roof, halfway up its visible part (after the figure
    is laid out: the angle is in display coordinates)."""
    low, _ = ax.get_xlim()
    bottom, _ = ax.get_ylim()
    start = max(low, bottom / peak.bandwidth_gbps)
    ridge = peak.fma_gflops / peak.bandwidth_gbps
    if start >= ridge:
        return
    (x0, y0), (x1, y1) = ax.transData.transform(
        [(start, peak.bandwidth_gbps * start), (ridge, peak.fma_gflops)]
    )
    angle = math.degrees(math.atan2(y1 - y0, x1 - x0))
    middle = math.sqrt(start * ridge)
    ax.annotate(
        f"bandwidth {peak.bandwidth_gbps:.1f} GB/s",
        (middle, peak.bandwidth_gbps * middle),
        xytext=(-4, 4),
        textcoords="offset points",
        rotation=angle,
        rotation_mode="anchor",
        ha="center",
        fontsize=8,
    )


def _pair(ax: Axes, pair: DispatchPair, colour: str) -> None:
    """IREE default's point, the schedule's, and an arrow between them."""
    default, scheduled = _xy(pair.baseline), _xy(pair.scheduled)
    row = _row(pair)
    kernel = f" [{row.kernel}]" if pair.scheduled is not None and row.kernel else ""
    speedup = f": {pair.speedup:.2f}x" if pair.speedup is not None else ""
    only = ""
    if pair.paired_by == "unpaired":
        only = " (IREE default only)" if pair.scheduled is None else " (schedule only)"
    label = f"{row.label}{kernel}{speedup}{only}"
    if default is not None:  # in the legend only when the schedule has no point
        ax.scatter(
            *default,
            marker="s",
            s=_MARKER_SIZE,
            facecolors="none",
            edgecolors=colour,
            linewidths=1.5,
            label=label if scheduled is None else None,
        )
    if scheduled is not None:
        ax.scatter(*scheduled, marker="o", s=_MARKER_SIZE, color=colour, label=label)
    if default is not None and scheduled is not None:
        ax.annotate(
            "",
            xy=scheduled,
            xytext=default,
            arrowprops={"arrowstyle": "->", "color": colour, "shrinkA": 5, "shrinkB": 5},
        )


_OFFSETS = [(7, 5), (7, -13), (-7, 5), (-7, -13), (7, 17), (-7, 17), (7, -25), (-7, -25)]
"""Where a point's number may go, in points from it: tried in order."""


def marker_boxes(ax: Axes, points: Sequence[tuple[float, float]]) -> list[Bbox]:
    """The display boxes of markers at ``points`` (data coordinates), for
    :func:`place_label` to keep clear of (after the figure is laid out)."""
    from matplotlib.transforms import Bbox

    boxes = []
    for xy in points:
        x, y = ax.transData.transform(xy)
        boxes.append(Bbox.from_bounds(x - 6, y - 6, 12, 12))
    return boxes


def place_label(
    ax: Axes,
    text: str,
    anchor: tuple[float, float],
    taken: list[Bbox],
    offsets: Sequence[tuple[float, float]],
    **style: Any,
) -> None:
    """Write ``text`` by ``anchor`` at the first of ``offsets`` (points) where it stays
    inside the axes and overlaps nothing in ``taken``; where every offset overlaps
    something, at the first that stays inside the axes (a label past the plot's edge is
    cut off in the PNG), else the last. Adds its box to ``taken``. ``style``: more
    ``annotate`` arguments (font size, colour)."""
    inside = ax.get_window_extent()
    fits: list[tuple[float, float]] = []
    for dx, dy in offsets:
        label = _annotate(ax, text, anchor, (dx, dy), style)
        box = label.get_window_extent()
        label.remove()
        if inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1):
            if not any(box.overlaps(other) for other in taken):
                fits = [(dx, dy)]
                break
            fits.append((dx, dy))
    chosen = fits[0] if fits else offsets[-1]
    taken.append(_annotate(ax, text, anchor, chosen, style).get_window_extent())


def _annotate(
    ax: Axes, text: str, anchor: tuple[float, float], offset: tuple[float, float], style: Any
) -> Any:
    """``text`` at ``offset`` points from ``anchor``: left-aligned to its right, right-
    aligned to its left."""
    return ax.annotate(
        text,
        anchor,
        xytext=offset,
        textcoords="offset points",
        ha="left" if offset[0] >= 0 else "right",
        **style,
    )


def _number_points(ax: Axes, points: Sequence[DispatchPair]) -> None:
    """Put each pair's dispatch number (``#N``) by its schedule's point (or its only
    point), at the first offset where it overlaps no marker and no number placed before."""
    xys = [xy for p in points for xy in (_xy(p.baseline), _xy(p.scheduled)) if xy is not None]
    taken = marker_boxes(ax, xys)
    for pair in points:
        anchor = _xy(pair.scheduled) or _xy(pair.baseline)
        assert anchor is not None
        number = _row(pair).label.split(" ")[0]
        place_label(ax, number, anchor, taken, _OFFSETS, fontsize=8)
