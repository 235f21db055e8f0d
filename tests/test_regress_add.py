"""``tdsched regress BASELINE --add RECIPE``: a sweep's best becomes a gate entry with a
relative path, the sweep's thread count and a note of where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import tdsched
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.regress.baseline_file import load_baseline
from tdsched.schedules.sweep.freeze import write_frozen


@pytest.mark.process
def test_a_sweeps_best_is_added_relative_with_its_threads(tmp_path: Path) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    provenance = {"database": "s.db", "sweep": 4, "speedup": 1.23, "target": "x86", "threads": 2}
    best = write_frozen(
        RECIPES_DIR / "matmul_x86.yaml",
        sweeps / "matmul_x86.x86.best.yaml",
        {"TM": 32},
        "x86",
        provenance,
    )
    baseline = tmp_path / "perf" / "gates.yaml"
    baseline.parent.mkdir()
    proc = tdsched("regress", str(baseline), "--add", str(best))
    assert proc.returncode == 0, proc.stderr
    assert "added 1 entry" in proc.stderr and "--update" in proc.stderr
    (entry,) = load_baseline(baseline).entries
    assert entry.recipe == "../sweeps/matmul_x86.x86.best.yaml"
    assert entry.target == "x86" and entry.overrides == {"threads": 2}
    assert entry.expected_speedup is None
    assert entry.note == "best of sweep 4 (s.db), raced at 1.23x on x86"

    proc = tdsched("regress", str(baseline), "--add", "matmul_vulkan")
    assert proc.returncode == 0, proc.stderr
    added = load_baseline(baseline).entries[1]
    assert (added.recipe, added.target, added.overrides) == ("matmul_vulkan", "vulkan", {})

    again = tdsched("regress", str(baseline), "--add", str(best))
    assert (
        again.returncode == 2 and "already gates ../sweeps/matmul_x86.x86.best.yaml" in again.stderr
    )
    assert len(load_baseline(baseline).entries) == 2


@pytest.mark.process
def test_a_vulkan_sweeps_best_keeps_the_gpu_it_was_built_for(tmp_path: Path) -> None:
    provenance = {"sweep": 2, "speedup": 1.9, "target": "vulkan", "threads": None, "gpu": "ampere"}
    best = write_frozen(
        RECIPES_DIR / "matmul_vulkan.yaml",
        tmp_path / "matmul_vulkan.vulkan.best.yaml",
        {"TM": 32},
        "vulkan",
        provenance,
    )
    baseline = tmp_path / "gates.yaml"
    proc = tdsched("regress", str(baseline), "--add", str(best))
    assert proc.returncode == 0, proc.stderr
    (entry,) = load_baseline(baseline).entries
    # gated on the GPU the sweep built for, and with no CPU thread count
    assert (entry.target, entry.gpu, entry.cpu, entry.overrides) == ("vulkan", "ampere", None, {})
