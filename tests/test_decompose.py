"""The ``decompose`` primitive: a depthwise convolution's kernel schedule tiles it to one
window row and one output row, ``specialize`` names it, ``decompose`` makes it 1-D, and
the convolution vectorizer lowers it; right against the reference on x86 and Vulkan.
The batch is 2: IREE's Vulkan pipeline drops a unit batch dim before a kernel schedule
runs, and a depthwise generic without one is no named op to specialize into."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tdsched.schedules.cli.main import main

DEPTHWISE = """\
func.func @main(%x: tensor<2x18x18x32xf32>, %w: tensor<3x3x32xf32>) -> tensor<2x16x16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x16x16x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x16x16x32xf32>) -> tensor<2x16x16x32xf32>
  %c = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>,
      strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<2x18x18x32xf32>, tensor<3x3x32xf32>)
      outs(%init : tensor<2x16x16x32xf32>) -> tensor<2x16x16x32xf32>
  return %c : tensor<2x16x16x32xf32>
}
"""

ONE_ROW = [{"tile": {"sizes": [0, 0, 0, 0, 1, 0]}}, {"specialize": {}}, {"decompose": {}}]
"""The window's rows one at a time, then the named op's 1-D form."""

SCHEDULES = {
    "x86": [
        {"fuse_ext": {"root": {"op": "linalg.generic"}, "tile_sizes": [1, 4, 16, 0, 0, 0]}},
        {"producer": {"operand": 2, "as": "init"}},
        {"tile": {"sizes": [1, 1, 8, 16, 0, 0]}},
        *ONE_ROW,
        {"tile": {"target": "init", "sizes": [1, 1, 8, 16]}},
        {"cleanup": {}},
        {"vectorize": {}},
    ],
    "vulkan": [
        {"fuse_ext": {"root": {"op": "linalg.generic"}, "tile_sizes": [1, 1, 8, 0, 0, 0]}},
        {"producer": {"operand": 2, "as": "init"}},
        {"tile": {"sizes": [0, 0, 1, 4, 0, 0], "loop": "forall", "mapping": "thread",
                  "loops": "threads"}},
        {"fuse_into": {"producer": "init", "loop": "threads"}},
        *ONE_ROW,
        {"cleanup": {}},
        {"vectorize": {}},
    ],
}  # fmt: skip


def _recipe(tmp_path: Path, target: str) -> Path:
    (tmp_path / "dw.mlir").write_text(DEPTHWISE)
    kernel: dict[str, object] = {
        "name": "depthwise",
        "match": {"kind": "convolution"},
        "schedule": SCHEDULES[target],
    }
    if target == "vulkan":
        kernel["workgroup_size"] = [8, 8, 1]
    recipe = {
        "name": "dw",
        "workload": {"file": "dw.mlir"},
        "targets": [target],
        "tolerance": {"atol": 1e-4, "rtol": 1e-4},
        "kernels": [kernel],
    }
    path = tmp_path / f"dw_{target}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize("target", ["x86", "vulkan"])
def test_a_depthwise_convolution_decomposed_to_1d_is_right(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    if target == "vulkan":
        request.getfixturevalue("vulkan")
    recipe = _recipe(tmp_path, target)
    assert main(["run", str(recipe), "--no-time", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "ok", report
    assert main(["explain", str(recipe), "--json"]) == 0
    explained = json.dumps(json.loads(capsys.readouterr().out))
    # the named 2-D op became its 1-D form, and vectorize lowered that one
    assert "linalg.depthwise_conv_2d_nhwc_hwc" in explained
    assert "linalg.depthwise_conv_1d_nwc_wc" in explained


@pytest.mark.usefixtures("iree")
def test_decompose_on_an_op_it_cannot_make_1d_fails_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "bad.yaml"
    kernel = {
        "name": "mm",
        "match": {"kind": "contraction"},
        "schedule": [
            {"fuse_ext": {"root": {"op": "linalg.matmul"}, "tile_sizes": [16, 16, 0]}},
            {"decompose": {}},
            {"vectorize": {}},
        ],
    }
    recipe.write_text(
        yaml.safe_dump(
            {
                "name": "bad",
                "workload": {"generator": "matmul", "args": {"M": 64, "N": 64, "K": 64}},
                "targets": ["x86"],
                "kernels": [kernel],
            },
            sort_keys=False,
        )
    )
    assert main(["run", str(recipe), "--no-time", "--json"]) != 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "compile_failed"
    line = next(
        i for i, text in enumerate(recipe.read_text().splitlines(), 1) if "decompose" in text
    )
    assert f"bad.yaml:{line}:" in report["error"]
    assert "transform.structured.decompose failed to apply" in report["error"]
