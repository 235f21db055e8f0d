"""benchmarks/models_table.py: the table it writes into the docs and its options."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from benchmark_scripts import benchmark_script

table = benchmark_script("models_table")


def row(name: str, threads: int, default: float, dt: float, ort: float | None) -> dict[str, Any]:
    peers: dict[str, dict[str, Any]] = {
        "iree-data-tiling": {"status": "ok", "speedup": dt},
        "iree-data-tiling-ukernels": {"status": "ok", "speedup": dt * 1.1},
    }
    if ort is not None:
        peers["onnxruntime"] = {"status": "ok", "speedup": ort}
    return {
        "name": f"{name}-t{threads}",
        "threads": threads,
        "status": "ok",
        "run": {"time_ms": 12.345},
        "speedup_vs_default": default,
        "best_iree_configuration": min(default, dt),
        "peers": peers,
        "fraction_of_fma_peak": 0.456,
        "tune": {"wall_s": 300},
    }


def test_the_table_bolds_what_tdsched_loses_to_and_gives_geomeans() -> None:
    result = {
        "command_line": "python benchmarks/models_table.py --model squeezenet",
        "date": "2026-11-29T21:00:00+00:00",
        "cpu": "AMD EPYC",
        "cores": 2,
        "avx512f": True,
        "budgets": "squeezenet 3 min",
        "repeats": 9,
        "rows": [row("squeezenet", 1, 8.0, 7.5, 0.5), row("mobilenet", 2, 2.0, 1.5, 2.0)],
    }
    text = table.markdown(result)
    lines = text.splitlines()
    assert "| model | threads | status | tdsched ms | x IREE default | x best IREE |" in text
    assert "| squeezenet | 1 | ok | 12.35 | 8.00x | 7.50x | **0.50x** | 46% | 5.0 |" in lines
    assert "| mobilenet | 2 | ok | 12.35 | 2.00x | 1.50x | 2.00x | 46% | 5.0 |" in lines
    assert "Geomean x onnxruntime: 1.00x over 2 runs." in text


def test_a_budget_for_an_unknown_model_is_refused() -> None:
    args = argparse.Namespace(budget=3.0, budget_for=["resnet50=15"])
    assert table.budgets(args, ["squeezenet", "resnet50"]) == {"squeezenet": 3.0, "resnet50": 15.0}
    with pytest.raises(SystemExit, match="give MODEL=MINUTES"):
        table.budgets(argparse.Namespace(budget=3.0, budget_for=["vgg=5"]), ["squeezenet"])


def test_a_builder_model_is_passed_to_tune_as_it_is(tmp_path: Path) -> None:
    assert table.model_arguments(table.MODELS["mobilenet"], tmp_path) == [
        "mobilenet",
        "--via",
        "onnx",
    ]
