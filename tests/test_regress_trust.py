"""A gate users can trust on a busy machine (issue 57): ``--update`` does not bless a
schedule slower than IREE's own pipeline unless told to, ``--add ... --update`` says what
became of the added entry, and a calibration kernel that drifts gets a second attempt.

With the real IREE compiler and runtime, one x86 thread, and loose noise settings
(precision 30%, calibration drift 90%) where the outcome asserted is not about noise: the
1x1 register tiles run at about 0.02x IREE default, so no load change makes them 1.0x.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.cli.main import main
from tdsched.schedules.regress.baseline_file import load_baseline
from tdsched.schedules.sweep.freeze import write_frozen

pytestmark = pytest.mark.usefixtures("iree")

SIZE = {"M": 128, "N": 128, "K": 128, "LAYOUT": "rowmajor", "TM": 8, "TN": 128, "TK": 64, "RN": 16}
"""A shape and tiles that schedule it well (about 1.0-1.1x IREE default)."""
SLOW = {**SIZE, "TM": 8, "TN": 32, "RM": 1, "RN": 1}
"""1x1 register tiles: correct, and about 50x slower than IREE default."""
CALM = {"precision": 0.3, "calibration_tolerance": 0.9, "time_cap_s": 10, "threads": 1}
"""Settings under which a blessing is decided by the speedup, not by the machine's noise."""


def write_baseline(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"defaults": CALM, "entries": entries}, sort_keys=False))
    return path


def label(params: dict[str, Any]) -> str:
    return ",".join(f"{name}={value}" for name, value in params.items())


def regress(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    """The exit status, the entries of the JSON report by label, and stderr."""
    code = main(["regress", *args, "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    return code, {e["entry"]: e for e in report["entries"]}, captured.err


def interval(entry: dict[str, Any]) -> str:
    """How a reason states the entry's measured speedup."""
    s = entry["measurement"]["speedup"]
    return f"{s['median']:.3f}x, 95% interval [{s['low']:.3f}, {s['high']:.3f}]"


def test_update_does_not_bless_a_schedule_slower_than_iree_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = write_baseline(tmp_path / "b.yaml", [{"recipe": "matmul_x86", "params": SLOW}])
    before = baseline.read_text()
    code, entries, err = regress(capsys, str(baseline), "--update")
    (entry,) = entries.values()
    assert entry["status"] == "slower", entry["reason"]
    assert entry["reason"] == (
        f"{interval(entry)}: the schedule is slower than IREE's own pipeline, so it is not "
        "blessed; bless it anyway with --update --allow-slower"
    )
    assert code == 1  # a failure, as the other refusals to bless
    assert f"regress: SLOWER       matmul_x86 {label(SLOW)}" in err
    assert f"regress: nothing blessed; {baseline} is unchanged" in err
    assert baseline.read_text() == before


def test_allow_slower_blesses_it_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = write_baseline(tmp_path / "b.yaml", [{"recipe": "matmul_x86", "params": SLOW}])
    code, entries, err = regress(capsys, str(baseline), "--update", "--allow-slower")
    (entry,) = entries.values()
    assert entry["status"] == "blessed", entry["reason"]
    median = entry["measurement"]["speedup"]["median"]
    assert median < 0.5
    assert entry["reason"].endswith(
        f"expected_speedup set to {median:.3f}, slower than IREE's own pipeline (--allow-slower)"
    )
    assert (
        f"regress: warning: blessed matmul_x86 {label(SLOW)} at {median:.3f}x, slower than "
        "IREE's own pipeline (--allow-slower)"
    ) in err
    assert code == 0
    (blessed,) = load_baseline(baseline).entries
    assert blessed.expected_speedup == round(median, 3)


def test_add_with_update_says_the_added_entry_was_not_blessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    best = write_frozen(
        RECIPES_DIR / "matmul_x86.yaml",
        tmp_path / "matmul_x86.x86.best.yaml",
        SLOW,
        "x86",
        {"database": "s.db", "sweep": 1, "speedup": 0.02, "target": "x86", "threads": 1},
    )
    baseline = write_baseline(tmp_path / "perf.yaml", [])
    code, entries, err = regress(capsys, str(baseline), "--add", str(best), "--update")
    (entry,) = entries.values()
    assert entry["status"] == "slower", entry["reason"]
    lines = err.splitlines()
    assert f"regress: added 1 entry to {baseline} (not blessed: slower)" in lines
    assert (
        f"regress: nothing blessed; {baseline} holds the added entry without an expected_speedup"
    ) in lines
    assert not any("is unchanged" in line for line in lines)
    (added,) = load_baseline(baseline).entries
    assert added.recipe == "matmul_x86.x86.best.yaml" and added.expected_speedup is None
    assert code == 1


def test_a_drifting_calibration_is_timed_again_when_the_cap_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No drift is allowed, so the first attempt always drifts too much; the gate is so
    # low that the interval widened by the drift still clears it.
    common = {"recipe": "matmul_x86", "params": SIZE, "expected_speedup": 0.05}
    roomy = {**common, "calibration_tolerance": 0}
    # 8 rounds take longer than 0.05 s: no time is left for a second attempt.
    tight = {**roomy, "params": {**SIZE, "TK": 32}, "time_cap_s": 0.05}
    baseline = write_baseline(tmp_path / "b.yaml", [roomy, tight])
    code, entries, _ = regress(capsys, str(baseline))
    again, once = entries.values()
    assert again["measurement"]["attempts"] == 2, again["reason"]
    assert again["reason"].endswith(
        "(timed twice: the calibration kernel drifted more than ±0% in the first attempt; "
        "this is the attempt in which it drifted least)"
    )
    assert once["measurement"]["attempts"] == 1, once["reason"]
    assert "timed twice" not in once["reason"]
    for entry in (again, once):
        assert entry["status"] == "pass", entry["reason"]
        # the warm-up timed the calibration kernel at least twice before "before"
        assert len(entry["measurement"]["calibration"]["warmup_ms"]) >= 2
    assert code == 0
