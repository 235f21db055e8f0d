"""Integration: shipped recipes compile with the real IREE, run on the real runtime
(x86 and Vulkan via lavapipe), and match numpy; negative cases give clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.pipeline import build, compile_plan, plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator
from tdsched.schedules.measure.run_report import run
from tdsched.targets.compiler import CompileError, CompileRequest, run_compile

pytestmark = pytest.mark.usefixtures("iree")

# Smaller sizes keep CI fast; the schedules are the shipped ones (the shape tables'
# entries at 128^3 schedule the matmuls; at 256^3 IREE's own pipeline runs).
SMALL = {"M": 128, "N": 128, "K": 128}


def _run_ok(recipe_name: str, target: str | None = None, **overrides: int) -> dict[str, object]:
    report = run(plan(load(recipe_name), target, {**SMALL, **overrides}), time_it=False)
    assert report.status == "ok", report
    assert report.reference == "numpy"
    assert isinstance(report.max_abs_error, float) and report.max_abs_error < 1e-3
    return report


@pytest.mark.parametrize("name", ["matmul_x86", "matmul_x86_py", "matmul_bias_relu_x86"])
def test_x86_recipes_match_numpy(name: str) -> None:
    _run_ok(name)


@pytest.mark.parametrize(
    "name", ["matmul_vulkan", "matmul_vulkan_config", "matmul_bias_relu_vulkan"]
)
def test_vulkan_recipes_match_numpy(name: str, vulkan: None) -> None:
    _run_ok(name, "vulkan")


def test_non_divisible_sizes_stay_correct() -> None:
    # 200 is not a multiple of the 64x128 workgroup tile nor the 8x32 register tile
    # (given, so that no shape-table entry picks other tiles or IREE's pipeline).
    _run_ok("matmul_x86", M=200, N=136, K=72, TM=64, TN=128, TK=256)


def test_x86_config_only_kernel() -> None:
    r = RecipeBuilder("cfg", workload=generator("matmul", M=128, N=128, K=128))
    r.kernel_config(
        "mm",
        match=Match(op="linalg.matmul"),
        tile_sizes={"workgroup": [32, 32, 0], "vector": [8, 16, 0], "reduction": [0, 0, 1]},
    )
    report = run(plan(r.build()), time_it=False)
    assert report.status == "ok", report


def test_graph_schedule_generalizes_before_dispatch_formation(target: str, tmp_path: Path) -> None:
    workload = generator("matmul_bias_relu", M=64, N=64, K=64)
    r = RecipeBuilder("g", workload=workload, targets=[target])
    r.graph.match("linalg.matmul", name="mm").generalize().interchange([1, 0, 2])
    p = plan(r.build())
    files = build(p, tmp_path)
    text = files.input_file.read_text()
    assert "linalg.matmul" not in text and text.count("linalg.generic") == 2
    assert "affine_map<(d0, d1, d2) -> (d1, d2)>" in text  # loops interchanged
    assert run(p, time_it=False).status == "ok"


def test_graph_match_of_nothing_is_an_error() -> None:
    r = RecipeBuilder("g", workload=generator("matmul", M=64, N=64, K=64))
    r.graph.match("linalg.conv_2d_nhwc_hwcf").generalize()
    report = run(plan(r.build()), time_it=False)
    assert report.status == "not_applied"
    assert report.error is not None
    assert "test_integration.py:" in report.error and "matched no op in the module" in report.error


def test_unmatched_kernel_schedule_is_an_error(tmp_path: Path) -> None:
    r = RecipeBuilder("u", workload=generator("matmul", M=64, N=64, K=64))
    r.kernel("mm", match=Match(kind="contraction", shape=(128, 128, 128))).root.tile(
        [16, 16, 0], loop="forall", mapping="workgroup"
    )
    p = plan(r.build())
    with pytest.raises(RecipeError, match="this kernel schedule matched no dispatch"):
        compile_plan(p, build(p, tmp_path), tmp_path / "u.vmfb")


def test_kernel_step_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    r = RecipeBuilder("u", workload=generator("matmul", M=64, N=64, K=64))
    k = r.kernel("mm", match=Match(op="linalg.matmul"))
    k.match("linalg.generic", name="missing")
    k.root.tile([16, 16, 0], loop="forall", mapping="workgroup")
    p = plan(r.build())
    with pytest.raises(RecipeError, match="match step matched no op in the dispatch"):
        compile_plan(p, build(p, tmp_path), tmp_path / "u.vmfb")


def test_library_that_fails_to_load_is_an_error(tmp_path: Path) -> None:
    p = plan(load("matmul_x86"), overrides=SMALL)
    files = build(p, tmp_path)
    assert files.kernel_library is not None
    files.kernel_library.write_text("module { this is not mlir }")
    with pytest.raises(CompileError, match=r"could not load the kernel transform library"):
        run_compile(
            CompileRequest(files.input_file, p.target, tmp_path / "x.vmfb", files.kernel_library)
        )


def test_strategy_failure_is_an_error() -> None:
    # Fusing the matmul into a loop it does not feed fails inside iree-compile.
    r = RecipeBuilder("f", workload=generator("matmul", M=64, N=64, K=64))
    k = r.kernel("mm", match=Match(op="linalg.matmul"))
    fill = k.match("linalg.fill", name="fill")
    loops = fill.tile([16, 16], loop="forall", mapping="workgroup")
    k.root.fuse_into(loops)
    report = run(plan(r.build()), time_it=False)
    assert report.status == "compile_failed" and "iree-compile" in str(report.error)


def test_an_mlir_file_is_checked_against_the_numpy_ir_evaluator(tmp_path: Path) -> None:
    # Not against IREE default's build alone, which shares any bug of IREE's with the
    # scheduled build: both builds are checked against the evaluator's results.
    source = tmp_path / "mm.mlir"
    source.write_text(plan(load("matmul_x86"), overrides=SMALL).workload.mlir)
    p = plan(load("matmul_x86"), overrides=SMALL, input_file=source)
    report = run(p, time_it=False)
    assert report.status == "ok" and report.reference == "numpy-ir-evaluator"
    assert report.baseline_check is not None and report.baseline_check["status"] == "ok"
    assert report.reference_note is None


def test_an_mlir_file_too_large_to_evaluate_is_checked_against_iree_default(
    tmp_path: Path,
) -> None:
    big = {"M": 1024, "N": 1024, "K": 512}
    source = tmp_path / "mm.mlir"
    source.write_text(plan(load("matmul_x86"), overrides=big).workload.mlir)
    report = run(plan(load("matmul_x86"), overrides=big, input_file=source), time_it=False)
    assert report.status == "ok" and report.reference == "iree-default"
    assert report.baseline_check is None  # IREE default is the reference
    assert report.reference_note == (
        "too much work for the numpy IR evaluator (5.4e+08 element operations in 5.1e+02 "
        "numpy steps; its limit is 5e+08 element operations in 5e+04 numpy steps)"
    )


def test_on_vulkan_an_mlir_file_is_checked_against_the_numpy_ir_evaluator(
    vulkan: None, tmp_path: Path
) -> None:
    # IREE's default Vulkan build is timed, not trusted: it is checked against the
    # evaluator's results too.
    source = tmp_path / "mm.mlir"
    small = {"M": 64, "N": 64, "K": 64}
    source.write_text(plan(load("matmul_vulkan_config"), overrides=small).workload.mlir)
    p = plan(load("matmul_vulkan_config"), overrides=small, input_file=source)
    report = run(p, time_it=False)
    assert report.status == "ok" and report.reference == "numpy-ir-evaluator"
    assert report.baseline_check is not None and report.baseline_check["status"] == "ok"


def test_run_report_has_timing_fields() -> None:
    report = run(plan(load("matmul_x86"), overrides={"M": 128, "N": 128, "K": 128}), repeats=2)
    assert report.status == "ok"
    for value in (report.time_ms, report.baseline_ms):
        assert value is not None and value.min <= value.median <= value.max
    assert report.to_json()["time_ms"]["samples"] == 2
    assert isinstance(report.speedup, float) and report.speedup > 0
    assert report.threads == 2 and str(report.iree_version).startswith("3.13")


def test_scheduled_module_differs_from_default(tmp_path: Path) -> None:
    # The schedule visibly applies: different workgroup tiles give different binaries.
    sizes = []
    for tm in (32, 128):
        p = plan(load("matmul_x86"), overrides={**SMALL, "TM": tm})
        out = tmp_path / f"tm{tm}.vmfb"
        compile_plan(p, build(p, tmp_path, stem=f"tm{tm}"), out)
        sizes.append(out.read_bytes())
    assert sizes[0] != sizes[1]
    assert np.frombuffer(sizes[0][:4], dtype=np.uint8).size == 4
