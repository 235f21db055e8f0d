"""A step whose handle comes out empty is reported at that step: where the script failed
because of it (IREE's 'requires exactly one ... (got 0)'), and where it silently did
nothing in some of the dispatches a kernel schedule applies to."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import tdsched
from tdsched.schedules.base.errors import ScheduleNotApplied, Where
from tdsched.schedules.compile.emit import Marker
from tdsched.schedules.compile.pipeline import _require, plan
from tdsched.schedules.frontends.loading import load

TWO_MATMULS = """\
func.func @two(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %acc: tensor<64x64xf32>)
    -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = linalg.matmul ins(%b, %a : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%acc : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %c, %d : tensor<64x64xf32>, tensor<64x64xf32>
}
"""

# One kernel schedule for both matmuls; only the first dispatch has a fill to fuse.
RECIPE = """\
name: two_matmuls
workload: {file: two.mlir}
targets: [x86]
kernels:
  - name: matmul
    match: {kind: contraction}
    schedule:
      - match: {op: linalg.fill, as: fill}
      - tile: {sizes: [16, 16, 0], loop: forall, mapping: workgroup, loops: workgroups}
      - fuse_into: {producer: fill, loop: workgroups}
      - vectorize: {}
"""

MARKER = Marker("tdsched: kernel 'k' matched 'fill'", Where("r.yaml", 8, "match"), "no op")


def _printed(*bodies: str) -> str:
    """What transform.print writes for MARKER once per body (empty: no op)."""
    return "".join(f"[[[ IR printer: {MARKER.text} ]]]\n{body}\n" for body in bodies)


def test_a_marker_empty_in_one_of_two_dispatches_is_not_applied() -> None:
    _require((MARKER,), _printed("linalg.fill", "linalg.fill"))  # applied in both
    with pytest.raises(ScheduleNotApplied, match=r"r\.yaml:8: match: no op \(so in 1 of the 2"):
        _require((MARKER,), _printed("linalg.fill", ""))


def test_a_failed_script_is_blamed_on_the_empty_handle_before_it() -> None:
    failure = "iree-compile failed (exit 1):\nr.yaml:9:1: error: requires exactly one (got 0)"
    with pytest.raises(ScheduleNotApplied) as caught:
        _require((MARKER,), _printed(""), failure)
    assert "r.yaml:8: match: no op; it then failed: r.yaml:9:1: error: requires" in str(
        caught.value
    )
    # A step the failed script never reached printed nothing: not blamed (the caller
    # raises the compile error itself).
    _require((MARKER,), "", failure)


def test_a_handle_a_step_produced_is_required_where_a_later_step_uses_it() -> None:
    markers = plan(load("matmul_x86"), overrides={"LAYOUT": "rowmajor"}).scripts.kernel_markers
    produced = [m for m in markers if "produced" in m.text]
    # tile binds 'workgroups' and fuse_into uses it; tile rebinds 'root', which the next
    # tile uses.
    loops = next(m for m in produced if "'workgroups'" in m.missing)
    assert loops.where.field == "kernels[0].schedule[1].tile"
    assert loops.text == "tdsched: kernel 'matmul' step 1 (tile) produced loops"
    assert "left handle 'workgroups' empty, so the step that uses it" in loops.missing
    assert "kernels[0].schedule[2].fuse_into) would not apply" in loops.missing
    assert any("'root'" in m.missing for m in produced)


def test_a_kernel_schedule_that_misses_in_one_dispatch_is_reported(
    iree: str, tmp_path: Path
) -> None:
    (tmp_path / "two.mlir").write_text(TWO_MATMULS)
    (tmp_path / "two.yaml").write_text(RECIPE)
    proc = tdsched("compile", str(tmp_path / "two.yaml"), "-o", str(tmp_path / "two.vmfb"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "two.yaml:8: kernels[0].schedule[0].match: this match step matched no op" in (
        proc.stderr
    )
    assert "so in 1 of the 2 dispatches its kernel schedule ran on" in proc.stderr
