"""The docs' ``$ tdsched ...`` samples (``docs_samples``): each says whether the docs test
runs it, and each one it runs prints what the docs show, without writing into the
repository."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_samples import MARKER, REPO, SAMPLES, Sample, doc_pages, mismatch, samples

ALL = [sample for page in doc_pages() for sample in samples(page)]
RUN = [sample for sample in ALL if sample.extra_args is not None]


def _gates(sample: Sample) -> bool:
    """Whether the sample runs a regression gate (``tdsched regress``, not its
    ``history``), whose verdict (PASS, FAIL, INCONCLUSIVE) depends on timing: such
    samples run one at a time (the ``serial`` marker)."""
    for step in sample.steps:
        words = step.command.split()
        if words[:2] == ["tdsched", "regress"] and words[2:3] != ["history"]:
            return True
    return False


GATE_ATTEMPTS = 3
"""Runs of a gate step whose docs show a verdict and which came out INCONCLUSIVE: the
gate saying that the machine's load changed while it measured (a busy VM's neighbours),
not that the docs went wrong."""


def _inconclusive_by_load(command: str, shown: list[str], printed: str) -> bool:
    """Whether a ``tdsched regress`` gate step printed INCONCLUSIVE where its docs show
    a verdict (so running it again on a calmer moment may print what the docs show)."""
    words = command.split()
    gate = words[:2] == ["tdsched", "regress"] and words[2:3] != ["history"]
    return gate and "INCONCLUSIVE" in printed and not any("INCONCLUSIVE" in s for s in shown)


RUN_PARAMS = [
    pytest.param(s, id=s.name, marks=[pytest.mark.serial] if _gates(s) else []) for s in RUN
]


def test_every_sample_says_whether_the_docs_test_runs_it() -> None:
    unmarked = [s.name for s in ALL if not MARKER.match(s.marker or "")]
    assert not unmarked, (
        "these samples need a line '<!-- docs-sample: run [ARGS] -->' or "
        f"'<!-- docs-sample: not run: WHY -->' before them (tests/docs_samples.py): {unmarked}"
    )
    assert len(RUN) >= 10


def test_every_sample_folder_exists_and_is_used() -> None:
    named = {s.folder for s in RUN if s.folder is not None}
    missing = sorted(str(f) for f in named if not f.is_dir())
    assert not missing, f"docs samples run in folders that do not exist: {missing}"
    unused = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and p not in named)
    assert not unused, f"docs/samples folders no sample runs in: {unused}"


def _changed_files() -> str:
    """What ``git status`` says of the checkout (files a command wrote show up)."""
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _command(words: list[str], extra_args: str) -> list[str]:
    """The program to run for one command line of a sample."""
    if words[0] == "python":
        return [sys.executable, *words[1:]]  # a script the sample wrote (a bundle's bench.py)
    if words[0] != "tdsched":
        return words  # e.g. `cat perf.yaml`, showing a file the command before wrote
    return [
        sys.executable,
        "-m",
        "tdsched.schedules.cli.main",
        *words[1:],
        *shlex.split(extra_args),
    ]


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize("sample", RUN_PARAMS)
def test_a_sample_prints_what_the_docs_show(
    sample: Sample, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if any("vulkan" in step.command for step in sample.steps):
        request.getfixturevalue("vulkan")  # skips without a device, unless CI requires one
    before = _changed_files()
    cwd = REPO
    if sample.folder is not None:
        cwd = tmp_path / sample.folder.name
        shutil.copytree(sample.folder, cwd)
    status = None
    for step in sample.steps:
        if step.command == "echo $?":
            assert step.shown == [str(status)], f"{sample.name}: exit status {status}"
            continue
        words = shlex.split(step.command, comments=True)
        quiet = "2>/dev/null" in words
        words = [w for w in words if w != "2>/dev/null"]
        for _ in range(GATE_ATTEMPTS):
            done = subprocess.run(
                _command(words, sample.extra_args or ""),
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL if quiet else subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},  # as a terminal interleaves them
                timeout=900,
                check=False,
            )
            if not _inconclusive_by_load(step.command, step.shown, done.stdout):
                break
        status = done.returncode
        # A shipped recipe is named by where it is installed: the docs show the checkout's.
        printed = done.stdout.replace(f"{cwd}/", "").replace(f"{REPO}/", "").splitlines()
        problem = mismatch(step.shown, printed)
        assert problem is None, (
            f"{sample.name}: `{step.command}` no longer prints what the docs show, {problem}. "
            f"It printed:\n{done.stdout}"
        )
    assert _changed_files() == before, f"{sample.name} wrote into the repository"
