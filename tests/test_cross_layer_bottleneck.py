"""resnet_block_cross_layer_x86: both ways of fusing the bottleneck across layers build
the dispatch regions they say and compute the block right (numerics against numpy)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tdsched.schedules.compile.pipeline import build, plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import run

# A small bottleneck: 8x8 pixels, 32 channels, inner width 16.
_SHAPE = {"H": 8, "W": 8, "C": 32, "M": 16}


def _region_ops(reports: list[str]) -> list[int]:
    """How many ops each dispatch region groups, from the build's graph reports."""
    counts = []
    for report in reports:
        for line in report.splitlines():
            if line.startswith("dispatch_region: grouped "):
                counts.append(int(line.split()[2]))
    return counts


@pytest.mark.usefixtures("iree")
def test_whole_bottleneck_is_one_dispatch_and_matches_numpy(tmp_path: Path) -> None:
    """FUSE block: the three convolutions and their epilogues are one dispatch region
    (the pad of x stays out), and the block is right."""
    params = {**_SHAPE, "FUSE": "block", "TH": 4, "TW": 4, "RW1": 3, "RF1": 16}
    params |= {"RW2": 4, "RF2": 16, "RW3": 4, "RF3": 32, "TC": 8}
    p = plan(load("resnet_block_cross_layer_x86"), "x86", params)
    files = build(p, tmp_path)
    assert files.input_file.read_text().count("flow.dispatch.region") == 1
    assert _region_ops(list(files.reports)) == [9]
    report = run(p, time_it=False)
    assert report.status == "ok", report
    assert report.max_abs_error is not None and report.max_abs_error < 1e-3


@pytest.mark.usefixtures("iree")
def test_tail_is_one_region_by_shape_and_matches_numpy(tmp_path: Path) -> None:
    """FUSE tail: the region is rooted at the block's last op, selected by its loop
    bounds among three generics, and grows up to the pad: the 3x3 conv, its bias + relu,
    the expand and its epilogue. The reduce stays IREE's dispatch; both kernels apply,
    and the block is right."""
    params = {**_SHAPE, "FUSE": "tail", "TH": 2, "TH1": 2, "RW1": 4, "RF1": 16}
    params |= {"RW2": 4, "RF2": 16, "RW3": 4, "RF3": 32, "RK": 8, "TC": 8}
    p = plan(load("resnet_block_cross_layer_x86"), "x86", params)
    files = build(p, tmp_path)
    module = files.input_file.read_text()
    assert module.count("flow.dispatch.region") == 1
    assert "tensor.pad" in module
    assert _region_ops(list(files.reports)) == [6]
    for kernel in ("reduce", "tail"):
        assert any(f"kernel '{kernel}': fuse_ext: tiled" in r for r in files.reports)
    report = run(p, time_it=False)
    assert report.status == "ok", report
    assert report.max_abs_error is not None and report.max_abs_error < 1e-3
