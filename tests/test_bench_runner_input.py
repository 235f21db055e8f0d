"""The bench runner's bad input: a folder that is no bundle, a manifest of another format
or version, an incomplete manifest, a results file of another bundle. Each is one line
naming the file, exit status 2, and nothing is run (no IREE module is involved)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tdsched.targets.bench_runner import BUNDLE_FORMAT, main


def _manifest(folder: Path, **fields: object) -> Path:
    folder.mkdir(exist_ok=True)
    data = {"format": BUNDLE_FORMAT, "version": 1, **fields}
    (folder / "manifest.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda d: d.mkdir(), "cannot read the bundle's manifest"),
        (lambda d: (d.mkdir(), (d / "manifest.json").write_text("{")), "manifest.json: not JSON"),
        (
            lambda d: (d.mkdir(), (d / "manifest.json").write_text('{"format": "x"}')),
            "not a tdsched bench bundle manifest",
        ),
        (lambda d: _manifest(d, version=2), "bundle format version 2; this runner reads version 1"),
        (lambda d: _manifest(d), "incomplete manifest (KeyError: 'bundle')"),
    ],
)
def test_a_folder_that_is_no_usable_bundle_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write: object, message: str
) -> None:
    folder = tmp_path / "bundle"
    write(folder)  # type: ignore[operator]
    assert main([str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bench: error: {folder / 'manifest.json'}") and message in err
    assert err.count("\n") == 1 and not (folder / "results.json").exists()


@pytest.mark.process
def test_python_m_tdsched_bench_is_the_runner(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tdsched.bench", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "bench: error: " in done.stderr and "cannot read the bundle's manifest" in done.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "tdsched.bench", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "iree-base-runtime and numpy" in help_text and "--out" in help_text
