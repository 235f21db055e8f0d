"""Constant weights (``--param WEIGHTS=constant``): the shipped matmul recipes build and
match numpy on x86 and Vulkan (lavapipe), and IREE evaluates the pack of a constant B at
compile time, so the timed call of the mmt4d schedule packs only A."""

from __future__ import annotations

import json

import pytest
from cli_process import tdsched

SMALL = ["--param", "M=64", "--param", "N=64", "--param", "K=64"]


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize("recipe", ["matmul_x86", "matmul_bias_relu_x86", "matmul_mmt4d_x86"])
def test_shipped_matmul_recipes_take_constant_weights(recipe: str) -> None:
    proc = tdsched("run", recipe, *SMALL, "--param", "WEIGHTS=constant", "--json", "--no-time")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "ok" and report["reference"] == "numpy", report
    assert report["workload"].endswith("_constant_weights")


def test_mmt4d_with_constant_weights_on_vulkan(vulkan: None) -> None:
    proc = tdsched(
        "run", "matmul_mmt4d_x86", *SMALL, "--param", "WEIGHTS=constant",
        "--target", "vulkan", "--json", "--no-time",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "ok"


@pytest.mark.usefixtures("iree")
def test_the_pack_of_constant_weights_leaves_the_timed_call() -> None:
    def packs(weights: str) -> int:
        proc = tdsched(
            "run", "matmul_mmt4d_x86", *SMALL, "--param", f"WEIGHTS={weights}",
            "--threads", "1", "--repeats", "1", "--no-peak", "--profile", "--json",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        rows = [pair["scheduled"] for pair in json.loads(proc.stdout)["profile"]["dispatches"]]
        return sum("pack" in row["label"] and "unpack" not in row["label"] for row in rows if row)

    assert (packs("input"), packs("constant")) == (2, 1)
