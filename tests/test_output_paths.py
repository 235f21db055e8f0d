"""Every option that writes a file is checked when the command line is parsed, before any
work: a missing folder, a folder where a file goes, a read-only place, or an output that
is one of the command's inputs is one line naming the option and the fix, exit status 2
(issue: product hardening, items 9 and 10)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_inprocess import Outcome
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.cli.main import make_parser
from tdsched.schedules.cli.output_paths import _READ, _WRITTEN
from tdsched.schedules.sweep.database import ResultsDB

# Each command with an option that writes: its arguments, OUT where the output goes.
# Every one would do its work (compile, sweep, tune, profile) after the check.
WRITERS = {
    "compile -o": ["compile", "matmul_x86", "-o", "OUT"],
    "run --plot": ["run", "matmul_x86", "--profile", "--plot", "OUT"],
    "schema -o": ["schema", "-o", "OUT"],
    "lower -o": ["lower", "small_cnn", "-o", "OUT"],
    "tune --plot": ["tune", "small_cnn", "--plot", "OUT"],
    "report --csv": ["report", "DB", "--csv", "OUT"],
    "report --plot": ["report", "DB", "--plot", "OUT"],
    "report --roofline": ["report", "DB", "--roofline", "OUT"],
    "sweep --best-out": ["sweep", "matmul_x86", "--db", "DB", "--best-out", "OUT.yaml"],
    "sweep --db": ["sweep", "matmul_x86", "--db", "OUT"],
    "regress BASELINE": ["regress", "OUT.yaml", "--add", "matmul_x86"],
    "regress --markdown": ["regress", "BASELINE", "--markdown", "OUT"],
}
# Inputs of commands that write nothing: no output to compare them with.
UNDECLARED_INPUTS = {
    ("apply", "input"),
    ("explain", "input"),
    ("check", "before"),
    ("check", "after"),
}


def _args(case: str, out: Path, tmp_path: Path) -> list[str]:
    names = {
        "OUT": str(out),
        "OUT.yaml": str(out.with_suffix(".yaml")),
        "DB": str(tmp_path / "s.db"),
        "BASELINE": str(tmp_path / "gates.yaml"),
    }
    return [names.get(arg, arg) for arg in WRITERS[case]]


def _refused(proc: Outcome, *expected: str) -> str:
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("tdsched: error: ") and "Traceback" not in proc.stderr
    for text in expected:
        assert text in line, line
    return line


@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_missing_folder_is_refused_before_any_work(
    tdsched: Callable[..., Outcome], tmp_path: Path, case: str
) -> None:
    missing = tmp_path / "no-such-dir"
    args = _args(case, missing / "out", tmp_path)
    option = case.split()[1]
    _refused(tdsched(*args), option, f"no folder {missing}; create it first (mkdir -p {missing})")
    assert list(tmp_path.iterdir()) == []  # nothing written, no database created


@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_folder_where_a_file_goes_is_refused(
    tdsched: Callable[..., Outcome], tmp_path: Path, case: str
) -> None:
    folder = tmp_path / "out.yaml"
    folder.mkdir()
    _refused(tdsched(*_args(case, folder, tmp_path)), f"{folder}: is a folder")


def test_a_file_where_tune_makes_its_folder_is_refused(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    _refused(tdsched("tune", "small_cnn", "--out", str(notes)), f"--out {notes}: is a file")
    _refused(tdsched("tune", "small_cnn", "--out", str(tmp_path / "a" / "b")), "no folder")


def test_every_path_option_is_declared() -> None:
    """A new option that takes a path is declared read or written, so that it is checked."""
    commands = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        declared = {
            spec.dest for key in (_READ, _WRITTEN) for spec in parser.get_default(key) or []
        }
        for action in parser._actions:
            if action.type is Path and (name, action.dest) not in UNDECLARED_INPUTS:
                assert action.dest in declared, f"tdsched {name} {action.dest}"


def _database(path: Path) -> Path:
    ResultsDB(path).close()
    return path


@pytest.mark.parametrize("option", ["--csv", "--plot", "--roofline"])
def test_report_never_writes_over_its_database(
    tdsched: Callable[..., Outcome], tmp_path: Path, option: str
) -> None:
    db = _database(tmp_path / "s.db")
    before = db.read_bytes()
    _refused(tdsched("report", str(db), option, str(db)), f"{option} {db}: ", f"DB {db}")
    link = tmp_path / "link.csv"
    link.symlink_to(db)
    _refused(tdsched("report", str(db), option, str(link)), f"DB {db}")
    assert db.read_bytes() == before


def test_sweep_never_writes_over_its_recipe_or_database(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    recipe = tmp_path / "mm.yaml"
    shutil.copy(RECIPES_DIR / "matmul_x86.yaml", recipe)
    db = ["--db", str(tmp_path / "s.db")]
    _refused(tdsched("sweep", str(recipe), *db, "--best-out", str(recipe)), f"RECIPE {recipe}")
    _refused(
        tdsched("sweep", str(recipe), *db, "--shape", "M=64,N=64,K=64", "--best-out", str(recipe)),
        f"RECIPE {recipe}",
    )
    shipped = RECIPES_DIR / "matmul_x86.yaml"
    _refused(tdsched("sweep", "matmul_x86", *db, "--best-out", str(shipped)), "RECIPE matmul_x86")
    both = tmp_path / "s.yaml"
    _refused(
        tdsched("sweep", str(recipe), "--db", str(both), "--best-out", str(both)),
        f"--db and --best-out both write {both}",
    )
    assert recipe.read_text() == shipped.read_text()


def test_sweep_best_out_is_named_as_what_it_holds(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    """--best-out is written exactly where it says: r.yml of r.yaml's sweep is not
    silently r.yaml (the recipe itself)."""
    db = ["--db", str(tmp_path / "s.db")]
    out = tmp_path / "best.txt"
    _refused(
        tdsched("sweep", "matmul_x86", *db, "--best-out", str(out)),
        f"name it {out.with_suffix('.yaml')}",
    )
    _refused(
        tdsched("sweep", "matmul_x86_py", *db, "--best-out", str(out)),
        f"name it {out.with_suffix('.py')}",
    )


def test_regress_never_writes_over_an_input(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    baseline = tmp_path / "gates.yaml"
    baseline.write_text("entries: []\n")
    _refused(tdsched("regress", str(baseline), "--add", str(baseline)), f"--add {baseline}")
    _refused(tdsched("regress", str(baseline), "--markdown", str(baseline)), f"BASELINE {baseline}")
    assert baseline.read_text() == "entries: []\n"


def test_lower_never_writes_over_its_model(tdsched: Callable[..., Outcome], tmp_path: Path) -> None:
    model = tmp_path / "m.mlir"
    model.write_text("module {}\n")
    _refused(tdsched("lower", str(model), "-o", str(model)), f"MODEL {model}")
    assert model.read_text() == "module {}\n"


def _without_root_override(command: list[str]) -> list[str]:
    """``command`` as a user who cannot write a read-only file: root writes anywhere, so
    it runs without the capability that lets it (or the test skips)."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv: cannot make a path read-only to this test")
    return [
        setpriv,
        "--bounding-set",
        "-dac_override",
        "--inh-caps",
        "-dac_override",
        "--",
        *command,
    ]


@pytest.mark.process
def test_read_only_outputs_are_refused_before_the_work(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    baseline = tmp_path / "gates.yaml"
    baseline.write_text("entries: []\n")
    baseline.chmod(0o444)
    folder.chmod(0o555)
    cli = [sys.executable, "-m", "tdsched.schedules.cli.main"]
    try:
        for args, expected in [
            (["schema", "-o", str(folder / "s.json")], f"the folder {folder} is read-only"),
            (["regress", str(baseline), "--update"], f"the file {baseline} is read-only"),
            # tune's default --out, MODEL.tune in the current folder, is checked too
            (["tune", "small_cnn"], "--out small_cnn.tune: the folder . is read-only"),
        ]:
            command = _without_root_override([*cli, *args])
            proc = subprocess.run(command, capture_output=True, text=True, check=False, cwd=folder)
            assert proc.returncode == 2, proc.stderr
            assert proc.stderr.startswith("tdsched: error: ") and expected in proc.stderr
    finally:
        folder.chmod(0o755)
