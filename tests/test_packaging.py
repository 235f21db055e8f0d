"""What `pip install .` installs: the built wheel must hold every module and shipped recipe
of the checkout under tdsched.* (an explicit package list once left out a subpackage, and
every command of a non-editable install died with ModuleNotFoundError). .ci/wheel-smoke
installs the same wheel into a fresh environment and runs it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE_FOLDERS = ("schedules", "transform_lib", "targets", "recipes")
PACKAGE_FOLDER = "tdsched"  # the package itself: python -m tdsched


def checkout_files() -> set[str]:
    """Source modules and shipped recipe files, as paths inside the installed package."""
    files = set()
    for folder in SOURCE_FOLDERS:
        for path in (REPO / folder).rglob("*"):
            if "__pycache__" in path.parts or path.suffix not in (".py", ".yaml"):
                continue
            files.add("tdsched/" + path.relative_to(REPO).as_posix())
    files.update(f"tdsched/{path.name}" for path in (REPO / PACKAGE_FOLDER).glob("*.py"))
    return files


@pytest.mark.process
def test_wheel_holds_every_module_and_recipe(tmp_path: Path) -> None:
    # Build from a copy of the checkout's sources (nothing else of the checkout can reach it).
    source = tmp_path / "source"
    for name in (*SOURCE_FOLDERS, PACKAGE_FOLDER, "pyproject.toml", "setup.py", "README.md"):
        if not (REPO / name).exists():
            continue
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("tdsched-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(checkout_files() - names)
    assert not missing, f"the wheel lacks {missing}"
    assert "tdsched/transform_lib/graph/__init__.py" in names
    assert "tdsched/__main__.py" in names
    assert not any(name.startswith(("tests/", "tdsched/tests/")) for name in names)
    # setuptools built in a temporary folder: `pip install .` leaves the checkout as it was.
    assert sorted(p.name for p in source.iterdir() if p.name.startswith("build")) == []


@pytest.mark.process
def test_python_dash_m_tdsched_is_the_command(tmp_path: Path) -> None:
    # From an unrelated folder, so the installed package is what runs, not the checkout.
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "tdsched", *args]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)

    version = run("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("tdsched ") and "IREE" in version.stdout
    listed = run("list")
    assert listed.returncode == 0 and "matmul_x86" in listed.stdout
    assert run("no-such-command").returncode == 2
