"""Bad input, as an outsider gives it: each case runs ``tdsched`` as a user does (a process
of its own, in a folder of its own) and must end in a clear error: the documented exit
status (2 for bad input), a message on stderr that names what is wrong, no Python
traceback, no signal, no hang, and no file written outside the case's folder (a case that
tries, through a recipe, writes into ``outside/``, which must stay empty).

The cases cover the families of the hardening issues: recipe files that try to run
programs or write files, inputs that crashed or hung the commands, numbers and names out of
range, output paths that cannot be written. Nothing here compiles with IREE (every input is
refused before that), so the suite is part of the fast tier.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from onnx_models import relu_model
from tdsched.schedules.sweep.database import ResultsDB

TIMEOUT_S = 120.0
"""A case that runs longer hangs (every one is refused before any compile)."""

MATMUL = "workload: {generator: matmul, args: {M: 16, N: 16, K: 16}}\n"


@dataclass(frozen=True)
class Case:
    """One bad input: the command line (given the case's folder), the files it needs, and
    what its error must say (a regular expression searched in stderr)."""

    args: Callable[[Path], list[str]]
    expect: str
    files: dict[str, str | Callable[[Path], None]] = field(default_factory=dict)
    """Each file's text, or what writes it (given its path)."""
    status: int = 2


def _recipe(tail: str, name: str = "bad") -> str:
    return f"name: {name}\n{MATMUL}{textwrap.dedent(tail)}"


def _script(folder: Path) -> str:
    """A program a recipe must not be able to run: it would leave a file in outside/."""
    return str(folder / "evil.sh")


def _onnx_unique(path: Path) -> None:
    """A model with the op IREE 3.13's ONNX import segfaults on."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"], name="uniq0", sorted=1)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["u"])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _tune_state_spent(seconds: float) -> Callable[[Path], None]:
    """A tune output folder whose state file says ``seconds`` were spent."""

    def write(folder: Path) -> None:
        folder.mkdir()
        (folder / "tune-state.json").write_text(f'{{"spent_s": {seconds}}}')

    return write


def _results_db(path: Path) -> None:
    ResultsDB(path).close()


def _relu(shape: list[int], opset: int = 17) -> Callable[[Path], None]:
    return lambda path: relu_model(path, shape, opset=opset)


CASES: dict[str, Case] = {
    # -- recipe files that try to run a program or write outside their build folder
    "linker flag runs a program": Case(
        lambda d: ["run", "r.yaml"],
        r"r\.yaml:3: compile_flags\[0\]: refused .*--allow-unsafe-flags",
        {"r.yaml": _recipe("compile_flags: ['--iree-llvmcpu-embedded-linker-path=../evil.sh']\n")},
    ),
    "baseline flag dumps files": Case(
        lambda d: ["compile", "r.yaml", "-o", "x.vmfb"],
        r"r\.yaml:3: baseline\.flags\[0\]: refused '--iree-hal-dump-executable-sources-to=",
        {"r.yaml": _recipe("baseline: {flags: ['--iree-hal-dump-executable-sources-to=out']}\n")},
    ),
    "llvm output flag": Case(
        lambda d: ["show", "r.yaml"],
        r"r\.yaml:3: compile_flags\[0\]: refused '--o=\.\./outside/x'",
        {"r.yaml": _recipe("compile_flags: ['--o=../outside/x']\n")},
    ),
    "llvm exec flag": Case(
        lambda d: ["explain", "r.yaml"],
        r"refused '--exec-on-ir-change=",
        {"r.yaml": _recipe("compile_flags: ['--exec-on-ir-change=../evil.sh']\n")},
    ),
    "flag value is a path": Case(
        lambda d: ["apply", "r.yaml"],
        r"its value is a path",
        {"r.yaml": _recipe("compile_flags: ['--iree-opt-level=/etc/passwd']\n")},
    ),
    "sweep of an unsafe recipe": Case(
        lambda d: ["sweep", "r.yaml", "--db", "s.db"],
        r"r\.yaml:3: compile_flags\[0\]: refused",
        {
            "r.yaml": _recipe(
                "compile_flags: ['--iree-hal-preprocess-executables-with=../evil.sh']\n"
            )
        },
    ),
    "regress of an unsafe recipe": Case(
        lambda d: ["regress", "b.yaml"],
        r"r\.yaml:3: compile_flags\[0\]: refused",
        {
            "r.yaml": _recipe("compile_flags: ['--iree-llvmcpu-system-linker-path=../evil.sh']\n"),
            "b.yaml": "entries:\n  - {recipe: r.yaml, expected_speedup: 1.0}\n",
        },
    ),
    "regress --add of an unsafe recipe": Case(
        lambda d: ["regress", "b.yaml", "--add", "r.yaml"],
        r"r\.yaml:3: compile_flags\[0\]: refused",
        {"r.yaml": _recipe("compile_flags: ['--iree-plugin=../evil.so']\n")},
    ),
    "python model file": Case(
        lambda d: ["run", "m.yaml"],
        r"m\.yaml:3: workload\.model: refused model 'net\.py'.*--allow-python-workload",
        {
            "m.yaml": "name: m\nworkload:\n  model: net.py\n",
            "net.py": "open('../outside/ran', 'w').close()\n",
        },
    ),
    "workload file with HAL objects": Case(
        lambda d: ["run", "w.yaml"],
        r"w\.mlir:2:\d+: attribute 'hal\.executable\.objects'.*holds a computation",
        {
            "w.yaml": "name: w\nworkload: {file: w.mlir}\n",
            "w.mlir": (
                "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                "  %0 = arith.addf %a, %a {hal.executable.objects = "
                '[#hal.executable.object<{path = "../outside/evil.o"}>]} : tensor<4xf32>\n'
                "  return %0 : tensor<4xf32>\n}\n"
            ),
        },
    ),
    # -- inputs that crashed the command
    "onnx op that segfaults the import (lower)": Case(
        lambda d: ["lower", "u.onnx"],
        r"node 'uniq0' \(op Unique\): IREE's ONNX import crashed on it \(SIGSEGV\)",
        {"u.onnx": _onnx_unique},
    ),
    "onnx op that segfaults the import (tasks)": Case(
        lambda d: ["tasks", "u.onnx"],
        r"node 'uniq0' \(op Unique\): IREE's ONNX import crashed on it \(SIGSEGV\)",
        {"u.onnx": _onnx_unique},
    ),
    # -- outputs that cannot be written, or that are inputs
    "output in a missing folder": Case(
        lambda d: ["compile", "matmul_x86", "-o", "nofolder/mm.vmfb"],
        r"--output nofolder/mm\.vmfb: no folder nofolder; create it first",
    ),
    "report over its own database": Case(
        lambda d: ["report", "s.db", "--csv", "s.db"],
        r"--csv .*s\.db",
        {"s.db": _results_db},
    ),
    "sweep best recipe over its recipe": Case(
        lambda d: ["sweep", "r.yaml", "--db", "s.db", "--best-out", "r.yaml"],
        r"--best-out .*r\.yaml",
        {"r.yaml": _recipe("parameters: {T: 8}\nspace: {T: [8, 16]}\n")},
    ),
    # -- numbers, names and sizes out of range
    "tune budget inf": Case(
        lambda d: ["tune", "small_cnn", "--budget", "inf", "--out", "o"],
        r"argument --budget: expected a number of minutes > 0",
    ),
    "tune min-share 2": Case(
        lambda d: ["tune", "small_cnn", "--min-share", "2", "--out", "o"],
        r"argument --min-share: expected a number from 0 to 1",
    ),
    "empty gpu name": Case(
        lambda d: ["tasks", "small_cnn", "--gpu", ""],
        r"argument --gpu: expected the name of one of IREE's Vulkan",
    ),
    "shape names a parameter twice": Case(
        lambda d: ["sweep", "matmul_x86", "--shape", "M=64,M=128", "--db", "s.db"],
        r"argument --shape: 'M=64,M=128': M is given twice",
    ),
    "shape names a swept parameter": Case(
        lambda d: ["sweep", "matmul_x86", "--shape", "TM=32", "--db", "s.db"],
        r"--shape TM: matmul_x86's space sweeps TM",
    ),
    "parameter beyond 64 bits": Case(
        lambda d: ["run", "matmul_x86", "--param", "M=100000000000000000000"],
        r"M does not fit in 64 bits",
    ),
    "recipe name too long": Case(
        lambda d: ["sweep", "r.yaml", "--db", "s.db"],
        r"r\.yaml:1: name: .*100",
        {"r.yaml": _recipe("", name="a" * 300)},
    ),
    "yaml nested too deeply": Case(
        lambda d: ["show", "r.yaml"],
        r"r\.yaml: not valid YAML: lists or mappings nested too deeply",
        {"r.yaml": "name: deep\nworkload: " + "[" * 5000 + "]" * 5000 + "\n"},
    ),
    "constraint too long": Case(
        lambda d: ["sweep", "r.yaml", "--db", "s.db"],
        r"r\.yaml:\d+: constraints\[0\]: .* characters",
        {
            "r.yaml": _recipe(
                "parameters: {T: 8}\nspace: {T: [8, 16]}\nconstraints: ['"
                + " + ".join(["T"] * 5000)
                + " > 0']\n"
            )
        },
    ),
    "tune state with negative time spent": Case(
        lambda d: ["tune", "small_cnn", "--out", "o"],
        r"tune-state\.json: .*(spent_s|missing)",
        {"o": _tune_state_spent(-600)},
    ),
    "onnx opset newer than onnx knows": Case(
        lambda d: ["lower", "f.onnx"],
        r"f\.onnx: opset 999 is newer than any this onnx package knows",
        {"f.onnx": _relu([4, 4], opset=999)},
    ),
    "onnx model too large for the machine": Case(
        lambda d: ["tasks", "huge.onnx"],
        r"its tensors need about .* use smaller sizes",
        {"huge.onnx": _relu([1_000_000, 1_000_000])},
    ),
}


def _materialize(folder: Path, case: Case) -> None:
    for name, content in case.files.items():
        if isinstance(content, str):
            (folder / name).write_text(content)
        else:
            content(folder / name)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.process
def test_bad_input_is_a_clear_error_and_touches_nothing_outside(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    work, outside, home = tmp_path / "work", tmp_path / "outside", tmp_path / "home"
    for folder in (work, outside, home, tmp_path / "tmp"):
        folder.mkdir()
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {outside / 'ran'}\n")
    evil.chmod(0o755)
    _materialize(work, case)
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp_path / "tmp")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tdsched.schedules.cli.main", *case.args(work)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: no answer within {TIMEOUT_S:.0f} s (a hang)")
    assert proc.returncode >= 0, f"{name}: killed by signal {-proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == case.status, f"{name}: exit {proc.returncode}\n{proc.stderr}"
    assert proc.stderr.strip(), f"{name}: exit {proc.returncode} and nothing said"
    assert re.search(case.expect, proc.stderr, re.S), proc.stderr
    assert not list(outside.iterdir()), f"{name}: wrote {list(outside.iterdir())}"
