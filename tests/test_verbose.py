"""``tdsched -v`` prints every iree-compile command line, also those run in the child
processes of ``run`` (its evaluation child) and ``sweep`` (its workers)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from cli_process import tdsched
from tdsched.targets.compiler import VERBOSE_PREFIX

SMALL = ["--param", "M=64", "--param", "N=64", "--param", "K=64"]


def _compile_lines(stderr: str) -> list[list[str]]:
    return [
        shlex.split(line.removeprefix(VERBOSE_PREFIX))
        for line in stderr.splitlines()
        if line.startswith(VERBOSE_PREFIX)
    ]


@pytest.mark.usefixtures("iree")
def test_verbose_run_prints_the_childs_compile_lines() -> None:
    proc = tdsched("-v", "run", "matmul_x86", "--no-time", *SMALL, check=True)
    lines = _compile_lines(proc.stderr)
    assert len(lines) >= 2, proc.stderr  # the scheduled build and IREE default
    assert all(Path(words[0]).name == "iree-compile" for words in lines)
    assert any("--iree-llvmcpu-enable-ukernels=none" in words for words in lines)


@pytest.mark.usefixtures("iree")
def test_verbose_sweep_prints_the_workers_compile_lines(tmp_path: Path) -> None:
    proc = tdsched(
        "-v",
        "sweep",
        "matmul_x86",
        *SMALL,
        "--strategy",
        "random",
        "--samples",
        "2",
        "--repeats",
        "2",
        "--race",
        "1",
        "--race-time",
        "1",
        "--db",
        str(tmp_path / "s.db"),
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert len(_compile_lines(proc.stderr)) >= 3, proc.stderr  # two candidates and default


@pytest.mark.usefixtures("iree")
def test_without_verbose_no_compile_line_is_printed() -> None:
    proc = tdsched("run", "matmul_x86", "--no-time", *SMALL, check=True)
    assert not _compile_lines(proc.stderr)
