"""The shipped conv2d_x86 recipe: each way (LAYOUT) and filter kind rewrites the
convolution into what it says (the direct way: keeps it and schedules it, a 1x1 filter
as the contraction IREE makes of it, on x86 only) and is correct against numpy, on x86
and Vulkan."""

from __future__ import annotations

from pathlib import Path

import pytest
from tdsched.schedules.compile.pipeline import build, plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import run

SMALL = {"H": 9, "W": 9, "C": 8, "F": 32, "M0": 8, "N0": 16, "TC": 4, "RF": 16}
DIRECT_TILES = {1: {"WH": 3, "RW": 3}, 2: {"WH": 5, "RW": 5}}
"""The direct way's workgroup rows and register pixels per stride: they divide the
9x9 (stride 1) and 5x5 (stride 2) outputs."""
DIRECT_1X1_TILES = {"EP": 27, "EC": 32, "RW": 9}
"""The direct way's 1x1 workgroup (EP of the 81 pixels x EC of the 32 channels) and
register pixels (RW of EP)."""
CASES = [
    # (LAYOUT, KS, PAD, STRIDE, WEIGHTS)
    ("matmul", 3, 1, 1, "constant"),
    ("packed", 3, 1, 2, "constant"),
    ("packed", 1, 0, 2, "input"),
    ("matmul", 1, 0, 1, "input"),
    ("direct", 3, 1, 1, "constant"),
    ("direct", 3, 1, 2, "input"),
    ("direct", 1, 0, 1, "constant"),
]


def _check(
    target: str, layout: str, ks: int, pad: int, stride: int, weights: str, tmp: Path
) -> None:
    params = {**SMALL, "LAYOUT": layout, "KS": ks, "PAD": pad, "STRIDE": stride, "WEIGHTS": weights}
    if layout == "direct":
        params.update(DIRECT_1X1_TILES if ks == 1 else DIRECT_TILES[stride])
    p = plan(load("conv2d_x86"), target, params)
    files = build(p, tmp)
    module = files.input_file.read_text()
    report = run(p, time_it=False)
    assert report.status == "ok", report
    if layout == "direct":
        assert "linalg.conv_2d_nhwc_hwcf" in module
        kernel = "conv1x1_direct" if ks == 1 else "conv_direct"
        assert [k.name for k in p.recipe.kernels] == ([kernel] if target == "x86" else [])
        return
    assert not p.recipe.kernels
    assert "linalg.conv_2d" not in module
    assert ("linalg.mmt4d" in module) == (layout == "packed")
    assert ("linalg.matmul" in module) == (layout == "matmul")
    rewrite = "im2col" if ks > 1 else "conv1x1_to_matmul"
    assert any(
        r.startswith(f"{rewrite}: rewrote 1 linalg.conv_2d_nhwc_hwcf") for r in files.reports
    )


@pytest.mark.parametrize(("layout", "ks", "pad", "stride", "weights"), CASES)
@pytest.mark.usefixtures("iree")
def test_conv2d_recipe_on_x86(
    layout: str, ks: int, pad: int, stride: int, weights: str, tmp_path: Path
) -> None:
    _check("x86", layout, ks, pad, stride, weights, tmp_path)


@pytest.mark.parametrize(
    ("layout", "ks", "pad", "stride", "weights"), [*CASES[:2], CASES[4], CASES[6]]
)
def test_conv2d_recipe_on_vulkan(
    layout: str, ks: int, pad: int, stride: int, weights: str, tmp_path: Path, vulkan: None
) -> None:
    _check("vulkan", layout, ks, pad, stride, weights, tmp_path)
