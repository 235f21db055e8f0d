"""Labels on the roofline plots stay inside the axes: a best candidate at the right edge
of a sweep's roofline once had its label cut off in the PNG."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from tdsched.schedules.measure.roofline_plot import place_label

OFFSETS = [(9, 0), (-9, 0)]


def _axes() -> tuple[Figure, object]:
    fig = Figure(figsize=(4.0, 3.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    fig.draw_without_rendering()
    return fig, ax


def test_a_label_by_the_right_edge_goes_to_the_left_of_its_point() -> None:
    _, ax = _axes()
    taken: list = []
    place_label(ax, "TM=64, TN=128\n123.4 GFLOP/s, 80% of peak", (9.8, 5.0), taken, OFFSETS)
    (label,) = ax.texts
    assert label.get_ha() == "right"
    inside = ax.get_window_extent()
    assert inside.x0 <= taken[0].x0 and taken[0].x1 <= inside.x1


def test_a_label_with_room_takes_the_first_offset_that_overlaps_nothing() -> None:
    _, ax = _axes()
    taken: list = []
    place_label(ax, "A", (2.0, 5.0), taken, OFFSETS)
    place_label(ax, "B", (2.0, 5.0), taken, OFFSETS)  # the first offset is A's now
    assert [t.get_ha() for t in ax.texts] == ["left", "right"]
    assert not taken[0].overlaps(taken[1])
