"""``tdsched report``: header, ranked table, --all, CSV, JSON, plots and errors.

Most tests build a results database with ``ResultsDB`` directly (known speedups, failures,
baselines and a race), then call the CLI's ``main`` so its wiring is tested too.
The last one reports a real sweep compiled and timed by IREE.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from tdsched.schedules.cli.main import main
from tdsched.schedules.sweep.database import Result, ResultsDB, SweepWork
from tdsched.schedules.sweep.report import RESULT_COLUMNS, best_cells, centred_norm
from tdsched.targets.racing import Decision, RaceResult, Standing
from tdsched.targets.timing import Interval

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# (TM, TN, RN) -> sweep speedup of a correct candidate (baseline 2.0 ms).
SPEEDUPS = {
    (8, 32, 16): 1.2,
    (8, 32, 32): 1.5,  # best of cell (8, 32)
    (16, 32, 16): 0.8,
    (16, 64, 16): 1.1,
    (32, 32, 16): 1.3,
}
CONFIRMED = (16, 64, 16)  # won the race at 1.9x, so it ranks first
RUNNER_UP = (8, 32, 32)  # raced, eliminated after round 6
FAILED = {
    (32, 64, 16): ("compile_failed", "error: tile too large\n  at line 3"),
    (8, 64, 32): ("wrong", "max abs error 0.5 > 0.001"),
}


def _key(point: tuple[int, int, int]) -> str:
    return "k" + "-".join(map(str, point))


def _params(point: tuple[int, int, int]) -> dict[str, int]:
    return dict(zip(("TM", "TN", "RN"), point, strict=True))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Sweep 1 (done): 5 correct, 2 failed, baselines, one confirmed. Sweep 2: running."""
    path = tmp_path / "sweeps.db"
    db = ResultsDB(path)
    space = {
        "names": ["TM", "TN", "RN"],
        "total": 12,
        "valid": 8,
        "pruned": [["'TM * TN <= 1024'", 4]],
    }
    sweep = db.start_sweep(
        recipe="matmul_x86",
        source="/recipes/matmul_x86.yaml",
        target="x86",
        strategy="grid",
        signature="s1",
        options={"fixed": {"M": 64, "N": 64, "K": 64}},
        space=space,
    )
    db.record_baseline(sweep, "start", {"median": 2.0})
    for point, speedup in SPEEDUPS.items():
        result = Result(
            key=_key(point),
            recipe="matmul_x86",
            target="x86",
            params=_params(point),
            status="ok",
            time_ms=2.0 / speedup,
            baseline_ms=2.0,
            speedup=speedup,
            speedup_low=speedup - 0.1,
            speedup_high=speedup + 0.1,
            max_abs_error=1e-6,
            compile_s=0.5,
        )
        db.record(result, sweep)
    for point, (status, error) in FAILED.items():
        result = Result(
            key=_key(point),
            recipe="matmul_x86",
            target="x86",
            params=_params(point),
            status=status,
            error=error,
            max_abs_error=0.5 if status == "wrong" else None,
        )
        db.record(result, sweep)
    db.record_baseline(sweep, "end", {"median": 2.1})
    race = RaceResult(
        (
            Standing(_key(CONFIRMED), 1, Interval(1.9, 1.85, 1.95), 12, None, None),
            Standing(_key(RUNNER_UP), 2, Interval(1.45, 1.4, 1.5), 6, 6, Interval(1.3, 1.2, 1.4)),
        ),
        "decided",
        12,
        3.0,
    )
    db.record_raced(sweep, _key(CONFIRMED), 1.9)
    db.record_raced(sweep, _key(RUNNER_UP), 1.45)
    db.record_decision(sweep, Decision(race, (), 4.0).as_dict())
    db.finish_sweep(sweep)
    later = db.start_sweep(
        recipe="matmul_x86",
        source=None,
        target="x86",
        strategy="random",
        signature="s2",
        options={},
        space=space,
    )
    db.link(later, _key((8, 32, 32)))
    db.close()
    return path


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["report", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _table_rows(text: str) -> list[list[str]]:
    """The rows of the ranked table (those after the '#' header that start with a rank)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#"))
    return [line.split() for line in lines[start + 1 :] if line.split()[0].isdigit()]


def test_table_shows_header_and_ranks_the_race_first(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _report(capsys, str(db_path), "--sweep", "1")
    assert code == 0
    assert out.startswith("sweep 1: matmul_x86 on x86 (grid), done\n")
    assert "fixed     K=64, M=64, N=64" in out
    assert "space     12 candidates (TM x TN x RN), 8 valid; pruned 4 by 'TM * TN <= 1024'" in out
    assert "evaluated 7: 5 correct, 2 failed (1 compile_failed, 1 wrong)" in out
    assert "IREE default 2 ms at the start, 2.1 ms at the end (drift +5.0%)" in out
    rows = _table_rows(out)
    # The race's standings first, then the rest by screening speedup.
    assert [tuple(int(v) for v in row[1:4]) for row in rows] == [
        CONFIRMED,
        (8, 32, 32),
        (32, 32, 16),
        (8, 32, 16),
        (16, 32, 16),
    ]
    # base_ms, screened [interval], raced [interval], race state
    assert rows[0][5:11] == ["2", "1.100x", "[1.000,1.200]", "1.900x", "[1.850,1.950]", "best"]
    assert rows[1][8:11] == ["1.450x", "[1.400,1.500]", "out@6"]
    assert rows[2][8:10] == ["-", "-"]
    assert (
        "race: decided: TM=16, TN=64, RN=16 is the fastest, at least 20.0% ahead of the "
        "runner-up (2 raced, 12 rounds, 3.0 s)"
    ) in out
    assert "compile_failed: 1 (e.g. TM=32, TN=64, RN=16: error: tile too large)" in out
    assert "wrong: 1 (e.g. TM=8, TN=64, RN=32: max abs error 0.5 > 0.001)" in out


def test_top_limits_the_table(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, str(db_path), "--sweep", "1", "--top", "2")
    assert code == 0
    assert len(_table_rows(out)) == 2
    assert "... 3 more correct candidates (--top N shows more)" in out


def test_default_is_the_newest_sweep(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, str(db_path))
    assert code == 0
    assert out.startswith("sweep 2: matmul_x86 on x86 (random), running (still running")
    assert "finished -" in out
    assert "IREE default not timed" in out
    assert [row[1:4] for row in _table_rows(out)] == [["8", "32", "32"]]
    assert "no race was run: the best is a screening measurement" in out


def test_all_lists_every_sweep(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _report(capsys, str(db_path), "--all")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "id",
        "recipe",
        "target",
        "strategy",
        "status",
        "started",
        "evaluated",
        "best",
    ]
    first, second = (line.split() for line in lines[1:])
    assert first[:5] == ["1", "matmul_x86", "x86", "grid", "done"]
    assert first[-2:] == ["7", "1.900x"]
    assert second[:5] == ["2", "matmul_x86", "x86", "random", "running"]
    assert second[-2:] == ["1", "1.500x"]  # not raced in sweep 2: its screening
    code, out, _ = _report(capsys, str(db_path), "--all", "--json")
    assert [(s["sweep"], s["evaluated"], s["best_speedup"]) for s in json.loads(out)] == [
        (1, 7, 1.9),
        (2, 1, 1.5),
    ]


def test_csv_has_a_row_per_result_that_parses_back(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "r.csv"
    code, out, err = _report(capsys, str(db_path), "--sweep", "1", "--csv", str(out_file))
    assert code == 0
    assert f"wrote {out_file}" in err
    assert "sweep 1:" in out  # the text report still goes to stdout
    with out_file.open(newline="") as stream:
        reader = csv.DictReader(stream)
        assert reader.fieldnames == ["key", "status", "TM", "TN", "RN", *RESULT_COLUMNS]
        rows = {row["key"]: row for row in reader}
    assert set(rows) == {_key(p) for p in [*SPEEDUPS, *FAILED]}
    for point, speedup in SPEEDUPS.items():
        row = rows[_key(point)]
        assert (int(row["TM"]), int(row["TN"]), int(row["RN"])) == point
        assert row["status"] == "ok"
        assert float(row["speedup"]) == pytest.approx(speedup)
        assert float(row["time_ms"]) == pytest.approx(2.0 / speedup)
        assert float(row["baseline_ms"]) == 2.0
        assert float(row["compile_s"]) == 0.5
        assert row["error"] == ""
    assert float(rows[_key(CONFIRMED)]["confirmed_speedup"]) == 1.9
    assert rows[_key((8, 32, 16))]["confirmed_speedup"] == ""
    assert float(rows[_key((8, 32, 16))]["speedup_low"]) == pytest.approx(1.1)
    failed = rows[_key((32, 64, 16))]
    assert failed["status"] == "compile_failed"
    assert failed["time_ms"] == failed["speedup"] == ""
    assert failed["error"] == "error: tile too large\n  at line 3"
    # '-' writes the same CSV to stdout instead of the text report.
    code, out, _ = _report(capsys, str(db_path), "--sweep", "1", "--csv", "-")
    assert code == 0
    assert out.replace("\r\n", "\n") == out_file.read_text().replace("\r\n", "\n")


def test_json_has_metadata_baselines_and_results(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _report(capsys, str(db_path), "--sweep", "1", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["sweep"] == 1
    assert (report["recipe"], report["target"], report["strategy"]) == ("matmul_x86", "x86", "grid")
    assert report["status"] == "done"
    assert report["finished"] >= report["started"]
    assert report["options"]["fixed"] == {"M": 64, "N": 64, "K": 64}
    assert report["space"] == {
        "parameters": ["TM", "TN", "RN"],
        "total": 12,
        "valid": 8,
        "pruned": [{"reason": "'TM * TN <= 1024'", "count": 4}],
    }
    assert report["evaluated"] == 7
    assert report["baseline_ms"] == {"start": 2.0, "end": 2.1}
    assert report["drift"] == pytest.approx(0.05)
    assert [r["key"] for r in report["ranked"]][:2] == [_key(CONFIRMED), _key((8, 32, 32))]
    assert report["best"] == report["ranked"][0]
    assert report["best"]["confirmed_speedup"] == 1.9
    assert report["best"]["race"]["speedup"] == [1.9, 1.85, 1.95]
    assert report["ranked"][1]["race"]["eliminated_after"] == 6
    assert report["ranked"][2]["race"] is None
    assert report["decision"]["verdict"] == "decided"
    assert report["decision"]["margin"] == pytest.approx(0.2)
    assert report["decision"]["text"].startswith("race: decided: TM=16, TN=64, RN=16")
    assert sorted(r["status"] for r in report["failed"]) == ["compile_failed", "wrong"]
    assert set(report["ranked"][0]) >= {"params", "time_ms", "speedup", "max_abs_error"}


def test_heatmap_cells_take_the_best_over_other_parameters(db_path: Path) -> None:
    db = ResultsDB(db_path)
    cells = best_cells(db.results(1), "TM", "TN")
    raced = best_cells(db.results(1), "TM", "TN", raced=True)
    db.close()
    # The race's speedups are written under the screening ones, where a candidate raced.
    assert {cell: v for cell, v in raced.items() if v is not None} == {
        (16, 64): 1.9,
        (8, 32): 1.45,
    }
    assert cells == {
        (8, 32): 1.5,  # RN=32 beats RN=16 (1.2)
        (16, 32): 0.8,
        (16, 64): 1.1,  # the sweep's speedup, not the confirmation's
        (32, 32): 1.3,
        (32, 64): None,  # only a compile failure there
        (8, 64): None,  # only a wrong result
    }


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert 5_000 < len(data) < 2_000_000
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_heatmap_png(db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "heat.png"
    code, _, err = _report(
        capsys, str(db_path), "--sweep", "1", "--plot", str(png), "--x", "TM", "--y", "TN"
    )
    assert code == 0
    assert f"wrote {png}" in err
    width, height = _png_size(png)
    assert width >= 500 and height >= 400


@pytest.mark.parametrize("values", [[1.2, 1.5, 2.3], [0.6, 0.8], [0.8, 1.0, 1.9], [1.0]])
def test_heatmap_colours_are_centred_on_iree_default(values: list[float]) -> None:
    """Whatever the range (all faster, all slower, both, only 1.0), 1.0 is the middle
    colour, faster is above it and slower below."""
    pytest.importorskip("matplotlib")
    norm = centred_norm(values)
    assert float(norm(1.0)) == pytest.approx(0.5)
    assert float(norm(1.05)) > 0.5 > float(norm(0.95))


def test_scatter_png_by_index_and_by_parameter(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in ([], ["--x", "RN"]):
        png = tmp_path / f"scatter{len(extra)}.png"
        code, _, _ = _report(capsys, str(db_path), "--sweep", "1", "--plot", str(png), *extra)
        assert code == 0
        width, height = _png_size(png)
        assert width > height >= 400


def test_unknown_plot_parameter_lists_the_swept_ones(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "p.png"
    code, out, err = _report(capsys, str(db_path), "--sweep", "1", "--plot", str(png), "--x", "TK")
    assert code == 2
    assert out == ""
    assert err == "tdsched: error: --x TK: not a parameter of sweep 1; it swept TM, TN, RN\n"
    assert not png.exists()
    code, _, err = _report(capsys, str(db_path), "--plot", str(png), "--x", "TM", "--y", "TM")
    assert code == 2
    assert "--x and --y are both TM" in err


def test_plot_without_matplotlib_says_what_to_install(
    db_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    code, _, err = _report(capsys, str(db_path), "--plot", str(tmp_path / "p.png"))
    assert code == 2
    assert "install tdsched[plot]" in err


def test_missing_database_is_named_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope" / "sweeps.db"
    code, out, err = _report(capsys, str(missing))
    assert code == 2
    assert out == ""
    assert err.startswith(f"tdsched: error: {missing}: no such results database")
    assert not missing.exists() and not missing.parent.exists()


def test_unknown_sweep_lists_the_recorded_ones(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _report(capsys, str(db_path), "--sweep", "7")
    assert code == 2
    assert err == f"tdsched: error: {db_path}: no sweep 7 (recorded: 1, 2); --all lists them\n"


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("work", "[1, 2]", "expected an object with flops, uncounted, traffic_bytes, machine"),
        (
            "work",
            '{"flops": "many", "uncounted": [], "traffic_bytes": 8, "machine": "m"}',
            "flops must be int, got 'many'",
        ),
        (
            "work",
            '{"flops": 8, "uncounted": [3], "traffic_bytes": 8, "machine": "m"}',
            "uncounted must be list[str], got [3]",
        ),
        ("work", "{not json", "Expecting property name"),
        ("options", "", "Expecting value"),
    ],
)
def test_a_sweep_row_that_tdsched_did_not_write_is_named(
    db_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: str, problem: str
) -> None:
    """A damaged (or hand-edited) row: one line naming the database, sweep and column (a
    bad work was a TypeError traceback)."""
    import sqlite3

    with sqlite3.connect(db_path) as conn:
        conn.execute(f"UPDATE sweeps SET {column}=? WHERE id=1", (value,))
    for args in ([], ["--sweep", "1"], ["--all"]):
        code, out, err = _report(capsys, str(db_path), *args)
        assert code == 2 and out == ""
        (line,) = err.splitlines()
        assert line.startswith(
            f"tdsched: error: {db_path}: sweep 1: column {column!r} is not what tdsched records ("
        )
        assert problem in line
        clear = "or clear it (UPDATE sweeps SET work=NULL WHERE id=1)"
        assert line.endswith(clear) == (column == "work")


def test_database_without_sweeps_and_foreign_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.db"
    ResultsDB(empty).close()
    code, _, err = _report(capsys, str(empty))
    assert code == 2
    assert f"{empty}: no sweep recorded" in err
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    code, _, err = _report(capsys, str(junk))
    assert code == 2
    assert f"{junk}: not a tdsched results database" in err


@pytest.mark.usefixtures("iree")
def test_reports_a_real_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "sweeps.db"
    sweep = ["sweep", "matmul_x86", "--param", "M=128", "--param", "N=128", "--param", "K=128"]
    # row-major only: two random packed draws may build the same candidate (as may two
    # row-major ones that differ only in UNPACK, which they ignore)
    sweep += ["--param", "LAYOUT=rowmajor", "--param", "UNPACK=separate"]
    options = ["--strategy", "random", "--samples", "2", "--jobs", "1", "--repeats", "2"]
    options += ["--race-time", "2"]
    assert main([*sweep, *options, "--race", "2", "--db", str(db), "-q"]) == 0
    capsys.readouterr()

    code, out, _ = _report(capsys, str(db))
    assert code == 0
    assert out.startswith("sweep 1: matmul_x86 on x86, 2 threads (random), done\n")
    assert "fixed     K=128, LAYOUT=rowmajor, M=128, N=128, UNPACK=separate" in out
    assert "evaluated 2: 2 correct, 0 failed" in out
    rows = _table_rows(out)
    assert len(rows) == 2
    assert rows[0][-2] == "best"  # it raced (the race column, before max_err)
    assert rows[0][-4].endswith("x")  # its raced speedup, before its interval

    code, out, _ = _report(capsys, str(db), "--json")
    report = json.loads(out)
    assert report["evaluated"] == 2 and len(report["ranked"]) == 2
    assert set(report["baseline_ms"]) == {"start", "end"}
    assert report["ranked"][0]["confirmed_speedup"] > 0
    assert report["decision"]["best"] == report["best"]["key"]
    best_params = report["best"]["params"]
    assert " ".join(str(best_params[n]) for n in ("TM", "TN", "TK", "RN")) == " ".join(rows[0][1:5])
    # The sweep recorded its workload's work, from the IR, and the machine it ran on.
    work = report["work"]
    assert (work["flops"], work["traffic_bytes"], work["uncounted"]) == (
        2 * 128**3,
        3 * 128 * 128 * 4,
        [],
    )
    roof = tmp_path / "roof.png"
    code, _, err = _report(capsys, str(db), "--roofline", str(roof))
    assert code == 0
    assert "no roof" not in err  # same machine: the measured roof is drawn
    _png_size(roof)

    code, out, _ = _report(capsys, str(db), "--csv", "-")
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == 2
    assert all(float(row["speedup"]) > 0 and float(row["max_abs_error"]) < 1e-3 for row in table)

    png = tmp_path / "scatter.png"
    assert main(["report", str(db), "--plot", str(png), "--x", "TM"]) == 0
    _png_size(png)


def test_unwritable_output_is_a_clear_error(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for option in ("--csv", "--plot"):
        target = tmp_path / "no-such-dir" / "out"
        code, out, err = _report(capsys, str(db_path), option, str(target))
        assert code == 2
        assert out == ""
        folder = target.parent
        assert err == (
            f"tdsched: error: {option} {target}: no folder {folder}; "
            f"create it first (mkdir -p {folder})\n"
        )


def test_scatter_error_bars_span_each_screening_interval() -> None:
    from tdsched.schedules.sweep.report import interval_bars

    with_interval = Result(
        "a", "r", "x86", {}, "ok", speedup=1.5, speedup_low=1.2, speedup_high=1.6
    )
    without = Result("b", "r", "x86", {}, "ok", speedup=1.1)
    xs, ys, below, above = interval_bars([with_interval, without], {"a": 3.0, "b": 4.0})
    assert (xs, ys) == ([3.0], [1.5])
    assert below == [pytest.approx(0.3)] and above == [pytest.approx(0.1)]


ELSEWHERE = "a machine elsewhere"


@pytest.fixture
def worked_db(db_path: Path) -> Path:
    """``db_path`` with sweep 1's work recorded (a 64^3 f32 matmul) as measured on
    another machine: its report converts times to GFLOP/s, its roofline has no roof."""
    db = ResultsDB(db_path)
    db.record_work(1, SweepWork(2 * 64**3, [], 3 * 64 * 64 * 4, ELSEWHERE))
    db.close()
    return db_path


def test_work_line_and_json_give_gflops(
    worked_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _report(capsys, str(worked_db), "--sweep", "1")
    assert code == 0
    # IREE default: 2.1 ms at the end; the best: that times its race speedup, 1.9x
    default = 2 * 64**3 / 2.1e-3 / 1e9
    best = 1.9 * default
    assert (
        "work      0.0005243 GFLOP, 0.04915 MB in+out, 10.7 FLOP/byte; "
        f"best {best:.1f} GFLOP/s, IREE default {default:.1f} GFLOP/s"
    ) in out
    code, out, _ = _report(capsys, str(worked_db), "--sweep", "1", "--json")
    work = json.loads(out)["work"]
    assert work["flops"] == 2 * 64**3 and work["traffic_bytes"] == 3 * 64 * 64 * 4
    assert work["intensity"] == pytest.approx(2 * 64**3 / (3 * 64 * 64 * 4))
    assert work["machine"] == ELSEWHERE
    code, out, _ = _report(capsys, str(worked_db), "--sweep", "2", "--json")
    assert json.loads(out)["work"] is None


def test_roofline_of_a_sweep_from_another_machine_has_no_roof(
    worked_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "roof.png"
    code, _, err = _report(capsys, str(worked_db), "--sweep", "1", "--roofline", str(png))
    assert code == 0
    assert f"roofline: no roof: the sweep ran on {ELSEWHERE}, this machine is" in err
    assert f"wrote {png}" in err
    width, height = _png_size(png)
    assert width > height >= 400


def test_roofline_of_all_names_the_sweeps_it_leaves_out(
    worked_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "all.png"
    code, out, err = _report(capsys, str(worked_db), "--all", "--roofline", str(png))
    assert code == 0
    assert out.splitlines()[0].split()[:2] == ["id", "recipe"]  # the list still prints
    assert "roofline: not drawn (other conditions, or no work recorded): sweep 2" in err
    _png_size(png)


def test_roofline_of_a_sweep_without_work_says_to_run_it_again(
    worked_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "roof.png"
    code, _, err = _report(capsys, str(worked_db), "--sweep", "2", "--roofline", str(png))
    assert code == 2
    assert err == (
        "tdsched: error: --roofline: sweep 2 (matmul_x86) was recorded before sweeps kept "
        "their workload's work; run it again\n"
    )
    assert not png.exists()


def test_report_never_writes_the_database(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report opens the database read-only: on a read-only disk or another user's file
    it reads, it never says "attempt to write a readonly database". A database of an
    older schema (3: no work column) is reported as it is, not upgraded in place."""
    db = ResultsDB(db_path, read_only=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.record_decision(1, {"verdict": "alone"})
    finally:
        db.close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("ALTER TABLE sweeps DROP COLUMN work")
        conn.execute("UPDATE meta SET value='3' WHERE key='schema'")
    before = db_path.read_bytes()
    for args in ([], ["--all"], ["--sweep", "1", "--json"]):
        code, _, err = _report(capsys, str(db_path), *args)
        assert code == 0, err
    assert db_path.read_bytes() == before
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("3",)


@pytest.mark.process
def test_report_reads_a_database_in_a_read_only_folder(db_path: Path) -> None:
    """The user's case: a database (WAL, its -shm index gone) in a folder nobody may
    write. Root writes anywhere: it runs without the capability that lets it."""
    command = [sys.executable, "-m", "tdsched.schedules.cli.main", "report", str(db_path)]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv: cannot make a folder read-only to this test")
        command = [setpriv, "--bounding-set", "-dac_override", "--inh-caps", "-dac_override",
                   "--", *command]  # fmt: skip
    db_path.chmod(0o444)
    db_path.parent.chmod(0o555)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        db_path.parent.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert "sweep 2" in proc.stdout
