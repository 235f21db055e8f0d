"""The shipped recipes for transformer layers: row_norm_x86 (layernorm and rmsnorm, in
one fused dispatch or in IREE's), attention_x86 (the softmax decomposed) and
matmul_bias_relu's GELU and SiLU epilogues, each built by IREE and checked against its
numpy reference at shapes no tile divides."""

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


@pytest.mark.parametrize("form", ["exp_once", "one_dispatch"])
def test_attention_x86_matches_numpy_in_both_forms(form: str, target: str) -> None:
    params = {"H": 2, "S": 24, "D": 16, "FORM": form}
    report = run(plan(load("attention_x86"), target, params), time_it=False)
    assert report.status == "ok", report
    decomposed = any("decompose_softmax" in line for line in report.applied or [])
    assert decomposed == (form == "exp_once")


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_matmul_bias_relu_takes_another_activation(act: str, target: str) -> None:
    recipe = "matmul_bias_relu_x86" if target == "x86" else "matmul_bias_relu_vulkan"
    params = {"ACT": act, "M": 64, "N": 64, "K": 32}
    report = run(plan(load(recipe), target, params), time_it=False)
    assert report.status == "ok", report
    assert f"_{act}_" in report.workload
