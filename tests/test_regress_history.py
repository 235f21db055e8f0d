"""Gate histories: ``tdsched regress --record`` and ``tdsched regress history``.

The change-point tests draw series from a seeded generator (a step of known size at a
known run, noise of known size); the store and command tests write histories from
measurements built in process, so only the last test compiles (a real gate run recorded
twice)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from tdsched.schedules.cli.main import main
from tdsched.schedules.measure.status import Status
from tdsched.schedules.regress.baseline_file import Entry, Settings
from tdsched.schedules.regress.change_points import change_points, noise
from tdsched.schedules.regress.history import HistoryError, read_series, record_run
from tdsched.schedules.regress.measure import Measurement
from tdsched.schedules.regress.runner import EntryResult
from tdsched.schedules.regress.verdict import GateStatus, Verdict
from tdsched.targets.timing import Ratio, Timing

pytest_plugins = ["pytester"]


def series(n: int, step_at: int | None, step: float, sigma: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    values = 1.2 * np.exp(rng.normal(0.0, sigma, n))
    if step_at is not None:
        values[step_at:] *= 1.0 + step
    return [float(v) for v in values]


def test_a_5_percent_step_is_found_where_it_happened() -> None:
    found = [change_points(series(60, 30, -0.05, 0.02, seed)) for seed in range(10)]
    assert all(len(changes) == 1 for changes in found)
    assert sum(abs(changes[0].index - 30) <= 2 for changes in found) >= 9  # the aim
    for (change,) in found:
        assert change.is_regression and change.relative == pytest.approx(-0.05, abs=0.02)
        assert change.p_value < 1e-3


def test_noise_alone_has_no_change_point() -> None:
    found = [change_points(series(60, None, 0.0, 0.03, seed)) for seed in range(20)]
    assert sum(bool(f) for f in found) <= 1


def test_an_improvement_then_a_regression_are_both_found() -> None:
    values = series(60, 20, 0.10, 0.01, 0)
    values[40:] = [v / 1.10 * 0.97 for v in values[40:]]
    changes = change_points(values)
    assert [
        (abs(c.index - at) <= 2, c.is_regression) for c, at in zip(changes, (20, 40), strict=True)
    ] == [
        (True, False),
        (True, True),
    ]


def test_the_noise_estimate_ignores_a_step() -> None:
    quiet = series(60, None, 0.0, 0.02, 1)
    stepped = series(60, 30, 0.5, 0.02, 1)
    assert noise(np.log(stepped).tolist()) == pytest.approx(noise(np.log(quiet).tolist()), rel=0.2)


def result(label_params: dict[str, int], median: float, status: GateStatus) -> EntryResult:
    times = {
        "scheduled": Timing(1.0, 1.0, 1.0, 5),
        "iree_default": Timing(median, median, median, 5),
    }
    ratio = Ratio(median, median * 0.98, median * 1.02, 20, 1.0, "precise", times)
    measurement = Measurement(Status.OK, target="x86", speedup=ratio)
    entry = Entry("matmul_x86", "x86", dict(label_params))
    return EntryResult(entry, Settings(threads=1), measurement, Verdict(status, "measured"))


def record_series(
    path: Path, medians: list[float], machine: str = "cpu A", commits: list[str] | None = None
) -> None:
    for at, median in enumerate(medians):
        found = [result({"M": 64}, median, GateStatus.PASS)]
        commit = commits[at] if commits else None
        record_run(path, path.parent / "perf.yaml", found, commit=commit, machine=machine)


def test_runs_are_appended_and_read_back_per_entry_and_machine(tmp_path: Path) -> None:
    history = tmp_path / "h.db"
    record_series(history, [1.0, 1.1])
    record_series(history, [2.0], machine="cpu B")
    found = read_series(history)
    assert sorted(found) == [("matmul_x86@x86 M=64", "cpu A"), ("matmul_x86@x86 M=64", "cpu B")]
    a = found[("matmul_x86@x86 M=64", "cpu A")]
    assert [p.median for p in a] == [1.0, 1.1] and a[0].run.id < a[1].run.id
    assert a[0].status == "pass" and a[0].run.git_commit is None
    with sqlite3.connect(history) as db:
        (baseline_ms,) = db.execute("SELECT baseline_ms FROM measurements LIMIT 1").fetchone()
    assert baseline_ms == 1.0


def test_a_file_that_is_not_a_history_is_refused_and_left_alone(tmp_path: Path) -> None:
    other = tmp_path / "sweeps.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE results (key TEXT)")
    with pytest.raises(
        HistoryError, match=r"not a tdsched history \(tables: results\); give --record a new file"
    ):
        record_series(other, [1.0])
    with sqlite3.connect(other) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["results"]


def test_the_command_reports_a_regression_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "h.db"
    record_series(history, series(40, 20, -0.06, 0.01, 3))
    charts = tmp_path / "charts"
    code = main(["regress", "history", str(history), "--plot", str(charts)])
    captured = capsys.readouterr()
    assert code == 1
    assert "series   matmul_x86@x86 M=64 on cpu A: 40 runs, 1 change, REGRESSED" in captured.out
    assert "  change at run 21 (" in captured.out and "a regression" in captured.out
    (chart,) = charts.iterdir()
    assert chart.read_bytes().startswith(b"\x89PNG") and "wrote" in captured.err

    code = main(["regress", "history", str(history), "--json", "--since", "2999-01-01"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0 and document["regressed"] == 0  # the change came before that date
    (found,) = document["series"]
    assert found["runs"] == 40 and found["changes"][0]["regression"]
    assert found["changes"][0]["relative"] == pytest.approx(-0.06, abs=0.02)


def test_bad_history_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.db"
    assert main(["regress", "history", str(missing)]) == 2
    assert (
        f"{missing}: no such history file; record one with 'tdsched regress BASELINE --record"
        in (capsys.readouterr().err)
    )
    history = tmp_path / "h.db"
    record_series(history, [1.0] * 10)
    assert main(["regress", "history", str(history), "--since", "abc123"]) == 2
    assert (
        "--since abc123: no run of the history was recorded at a commit" in capsys.readouterr().err
    )
    assert main(["regress", "history", str(history), "--entry", "conv"]) == 2
    assert "no recorded series matches --entry / --machine" in capsys.readouterr().err


def test_a_step_between_commits_is_the_code_s_and_within_one_the_machine_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = series(40, 20, -0.08, 0.01, 5)
    one_commit, two_commits = tmp_path / "one.db", tmp_path / "two.db"
    record_series(one_commit, values, commits=["aaa111"] * 40)
    record_series(two_commits, values, commits=["aaa111"] * 20 + ["bbb222"] * 20)

    assert main(["regress", "history", str(one_commit)]) == 0
    out = capsys.readouterr().out
    assert "commit aaa111..aaa111): " in out
    assert "a regression with no commit between the runs: the machine changed, not the code" in out

    assert main(["regress", "history", str(two_commits), "--json"]) == 1
    (found,) = json.loads(capsys.readouterr().out)["series"]
    (change,) = found["changes"]
    assert change["commits"] == ["aaa111", "bbb222"] and not change["same_commit"]
    assert main(["regress", "history", str(two_commits), "--since", "bbb"]) == 0  # not after it
    capsys.readouterr()
    assert main(["regress", "history", str(two_commits), "--since", "aaa"]) == 1


def test_the_documented_history_finds_its_deliberate_regression(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 60 real gate runs (docs/commands/regress_history.md#a-real-example): 30 of a recipe,
    # then 30 after a commit that stopped tiling its reduction loop
    history = Path(__file__).parent.parent / "benchmarks/results/regress_history_cascadelake.db"
    assert main(["regress", "history", str(history)]) == 1
    out = capsys.readouterr().out
    assert "60 runs, 1 change, REGRESSED" in out
    assert "change at run 31 (2026-11-28, commit 47916b95244d..318d38eb71a2): 0.975x -> " in out
