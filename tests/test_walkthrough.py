"""The recipes of docs/walkthrough.md still do what the walkthrough says: the first is
refused at the step that uses 'root', the next two build, apply every step and compute
the convolution correctly (checked against numpy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import tdsched

WALKTHROUGH = Path(__file__).parents[1] / "docs" / "walkthrough"


@pytest.mark.usefixtures("iree")
def test_the_first_recipe_is_not_applied_at_its_tile_step() -> None:
    proc = tdsched("run", str(WALKTHROUGH / "conv_step1.yaml"), "--no-time", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["status"] == "not_applied"
    assert (
        "conv_step1.yaml:15: kernels[0].schedule[1].tile: this step uses 'root'"
        in (report["error"])
    )


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize("stage", ["conv_step2.yaml", "conv_step3.yaml"])
def test_the_later_recipes_compute_the_convolution(stage: str) -> None:
    proc = tdsched("run", str(WALKTHROUGH / stage), "--no-time", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "ok"
    assert report["max_abs_error"] < 1e-3
