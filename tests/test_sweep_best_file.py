"""Where a sweep writes its best recipe: never over another sweep's result or a file of
the user's, with workload paths relative to the frozen recipe."""

from __future__ import annotations

from pathlib import Path

import yaml
from tdsched.schedules.sweep.freeze import recorded_sweep, write_frozen

RECIPE = """\
name: from_file
workload: {file: model/mm.mlir}
parameters: {T: 8}
space: {T: [8, 16]}
"""


def _freeze(tmp_path: Path, out: Path, sweep: int) -> Path:
    source = tmp_path / "src" / "r.yaml"
    source.parent.mkdir(exist_ok=True)
    source.write_text(RECIPE)
    provenance = {"database": "s.db", "sweep": sweep}
    return write_frozen(source, out, {"T": 16}, "x86", provenance)


def test_frozen_yaml_keeps_workload_files_relative(tmp_path: Path) -> None:
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    frozen = _freeze(tmp_path, out_dir / "r.x86.best.yaml", sweep=1)
    document = yaml.safe_load(frozen.read_text())
    assert document["workload"]["file"] == "../src/model/mm.mlir"
    assert document["parameters"] == {"T": 16} and "space" not in document
    assert (frozen.parent / document["workload"]["file"]).resolve() == (
        tmp_path / "src" / "model" / "mm.mlir"
    )


def test_recorded_sweep_tells_whose_best_a_file_is(tmp_path: Path) -> None:
    frozen = _freeze(tmp_path, tmp_path / "r.x86.best.yaml", sweep=3)
    assert recorded_sweep(frozen) == ("s.db", 3)
    assert recorded_sweep(tmp_path / "missing.best.yaml") is None
    mine = tmp_path / "mine.best.yaml"
    mine.write_text("name: my own notes\n")
    assert recorded_sweep(mine) == ("", -1)


def test_a_sweep_never_overwrites_another_sweeps_best(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from tdsched.schedules.cli.sweep_command import _best_path

    db = tmp_path / "s.db"
    first = SimpleNamespace(recipe=SimpleNamespace(name="r"), target="x86", sweep_id=1)
    default = tmp_path / "r.x86.best.yaml"
    assert _best_path(db, first, ".yaml") == default  # nothing there yet
    _freeze(tmp_path, default, sweep=1)
    assert _best_path(db, first, ".yaml") == default  # its own (a resumed sweep)
    second = SimpleNamespace(recipe=SimpleNamespace(name="r"), target="x86", sweep_id=2)
    assert _best_path(db, second, ".yaml") == tmp_path / "r.x86.sweep2.best.yaml"
    assert _best_path(db, second, ".py") == tmp_path / "r.x86.best.py"
