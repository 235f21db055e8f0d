"""The shipped recipes for transformer layers: row_norm_x86 (layernorm and rmsnorm, in
one fused dispatch or in IREE's), attention_x86 (fused per query-row tile, or the softmax
decomposed, or IREE's form), batch_matmul_x86 and matmul_bias_relu's GELU and SiLU
epilogues, each built by IREE and checked against its numpy reference at shapes no tile
divides."""

from __future__ import annotations

import pytest
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import run


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize("form", ["fused", "iree"])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_row_norm_x86_schedules_each_norm_s_own_ops(norm: str, form: str) -> None:
    # 40 columns: neither the reductions' vectors nor the normalization's divide them
    params = {"NORM": norm, "FORM": form, "M": 24, "N": 40, "WG": 8, "VR": 4, "RV": 16}
    report = run(plan(load("row_norm_x86"), None, params | {"IV": 16}), time_it=False)
    assert report.status == "ok", report
    assert report.reference == "numpy"
    kernels = {
        ("layernorm", "iree"): ["row_sum", "squares", "normalize"],
        ("rmsnorm", "iree"): ["row_sum", "normalize_rms"],
        ("layernorm", "fused"): ["fused_layernorm"],
        ("rmsnorm", "fused"): ["fused_rmsnorm"],
    }
    applied = [line.split("'")[1] for line in report.applied or [] if line.startswith("kernel")]
    assert applied == kernels[norm, form]
    regions = [line for line in report.applied or [] if "dispatch_region" in line]
    assert len(regions) == (form == "fused")


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize("form", ["exp_once", "fused", "one_dispatch"])
def test_attention_x86_matches_numpy_in_each_form(form: str) -> None:
    # 24 tokens: the fused form's 16-wide register tiles and 16-column vectors do not
    # divide the scores' rows
    params = {"H": 2, "S": 24, "D": 16, "FORM": form, "TM": 8, "RM": 4, "RN": 16}
    report = run(plan(load("attention_x86"), None, params | {"VR": 4}), time_it=False)
    assert report.status == "ok", report
    steps = [line.split(" (")[0] for line in report.applied or []]
    expected = {
        "exp_once": ["graph[0]"],
        "fused": ["graph[1]", "kernel 'fused'"],
        "one_dispatch": [],
    }
    assert steps == expected[form], report.applied


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_matmul_bias_relu_takes_another_activation(act: str, target: str) -> None:
    recipe = "matmul_bias_relu_x86" if target == "x86" else "matmul_bias_relu_vulkan"
    params = {"ACT": act, "M": 64, "N": 64, "K": 32}
    report = run(plan(load(recipe), target, params), time_it=False)
    assert report.status == "ok", report
    assert f"_{act}_" in report.workload


@pytest.mark.usefixtures("iree")
def test_batch_matmul_x86_tiles_each_batch_s_matmul() -> None:
    # 20 columns, 33 rows: neither register tile divides them
    params = {"B": 3, "M": 33, "N": 20, "K": 32, "TM": 16, "TN": 32, "TK": 16, "RM": 8}
    report = run(plan(load("batch_matmul_x86"), None, params | {"RN": 16}), time_it=False)
    assert report.status == "ok", report
    assert report.applied is not None
    assert [line.split(" (")[0] for line in report.applied] == ["kernel 'batch_matmul'"]
