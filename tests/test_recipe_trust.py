"""A recipe file cannot run a program or write files of its choosing (docs/recipes.md, 'What
a recipe file may do'): flags that name programs, files or folders, flags outside
iree-compile's own --iree-* options, and Python model files are refused with the file, the
line and the option that lets them through; the user's grant on the command line does."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest
from cli_process import tdsched
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.build_folders import write_compile_script
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.recipe_trust import Trust, flag_problem
from tdsched.schedules.frontends.shipped import shipped_recipe_names
from tdsched.schedules.frontends.yaml_frontend import parse_recipe

RECIPE = """\
name: trust_probe
workload: {generator: matmul, args: {M: 16, N: 16, K: 16}}
"""

REFUSED = {
    # a program to run
    "linker": "--iree-llvmcpu-embedded-linker-path=/tmp/evil.sh",
    "system linker": "--iree-llvmcpu-system-linker-path=evil",
    "preprocessor": "--iree-hal-preprocess-executables-with=evil",
    "ptxas": "--iree-cuda-use-ptxas-from=evil",
    "plugin": "--iree-plugin=evil",
    "load plugin": "--iree-load-plugin=evil.so",
    "linker choice": "--iree-llvmcpu-link-embedded=false",
    # files or folders to write
    "dump sources": "--iree-hal-dump-executable-sources-to=out",
    "dump files": "--iree-hal-dump-executable-files-to=out",
    "static library": "--iree-llvmcpu-static-library-output-path=lib.a",
    "statistics file": "--iree-scheduling-dump-statistics-file=stats",
    "dot graph": "--iree-util-hoist-into-globals-print-constexpr-dotgraph-to=g.dot",
    "source listing": "--iree-vm-bytecode-source-listing=listing",
    "parameter export": "--iree-opt-export-parameters=scope=p.irpa",
    "parameter splat": "--iree-opt-splat-parameters=p.irpa",
    # files to read, link or substitute
    "substitute object": "--iree-hal-substitute-executable-object=d=evil.o",
    "object search path": "--iree-hal-executable-object-search-path=objs",
    "bitcode": "--iree-link-bitcode=evil.bc",
    "tuning spec": "--iree-codegen-tuning-spec-path=spec.mlir",
    "transform library": "--iree-codegen-transform-dialect-library=lib.mlir",
    "pass pipeline": "--iree-preprocessing-pass-pipeline=builtin.module(x{path=out})",
    "value is a path": "--iree-opt-level=/etc/passwd",
    # not iree-compile's own option: LLVM's and MLIR's can run programs or write
    "output": "--o=/tmp/x",
    "llvm exec": "--exec-on-ir-change=evil",
    "mlir dir": "--mlir-print-ir-tree-dir=/tmp/ir",
}


def _with(tail: str) -> str:
    return RECIPE + textwrap.dedent(tail)


@pytest.mark.parametrize("family", sorted(REFUSED))
def test_a_recipe_file_may_not_pass_a_flag_that_names_a_program_or_a_file(family: str) -> None:
    flag = REFUSED[family]
    for tail, line in (
        (f"compile_flags: [{flag!r}]\n", 3),
        (f"baseline: {{flags: [{flag!r}]}}\n", 3),
    ):
        with pytest.raises(RecipeError) as caught:
            parse_recipe(_with(tail), "r.yaml")
        message = str(caught.value)
        assert message.startswith(f"r.yaml:{line}: ")
        assert f"refused {flag!r}" in message and "--allow-unsafe-flags" in message
        granted = parse_recipe(_with(tail), "r.yaml", Trust(unsafe_flags=True))
        assert flag in (*granted.compile_flags, *granted.baseline.flags)


@pytest.mark.parametrize(
    "flag",
    [
        "--iree-opt-data-tiling",
        "--iree-llvmcpu-enable-ukernels=none",
        "--iree-llvmcpu-stack-allocation-limit=65536",
        "--iree-scheduling-optimize-bindings=false",
        "--iree-dispatch-creation-enable-aggressive-fusion",
        "--iree-input-demote-f64-to-f32",
        "--iree-hal-indirect-command-buffers=false",
        "--iree-codegen-llvmgpu-use-direct-convolution",
    ],
)
def test_iree_compile_knobs_pass(flag: str) -> None:
    assert flag_problem(flag) is None
    assert parse_recipe(_with(f"compile_flags: [{flag!r}]\n"), "r.yaml").compile_flags == (flag,)


def test_every_shipped_recipe_loads_without_a_grant() -> None:
    for name in shipped_recipe_names():
        load(name)


def test_a_python_model_file_in_a_recipe_file_needs_a_grant(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    (tmp_path / "net.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: python_model\nworkload:\n  model: net.py:model\n")
    with pytest.raises(RecipeError) as caught:
        load(str(recipe))
    assert str(caught.value).startswith(f"{recipe}:3: workload.model: refused model 'net.py:model'")
    assert "--allow-python-workload" in str(caught.value)
    assert load(str(recipe), Trust(python_workload=True)).workload.model == "net.py:model"
    assert not ran.exists()  # loading does not build the model
    # a shipped model is no file: no grant needed
    recipe.write_text("name: shipped_model\nworkload: {model: small_cnn}\n")
    assert load(str(recipe)).workload.model == "small_cnn"


def _linker_recipe(folder: Path) -> tuple[Path, Path]:
    """A recipe whose flag makes a script the linker, and the file the script leaves."""
    script, ran = folder / "linker.sh", folder / "ran"
    script.write_text(f"#!/bin/sh\ntouch {ran}\nexit 1\n")
    script.chmod(0o755)
    recipe = folder / "r.yaml"
    recipe.write_text(_with(f"compile_flags: ['--iree-llvmcpu-embedded-linker-path={script}']\n"))
    return recipe, ran


@pytest.mark.process
def test_the_command_line_refuses_before_any_work(tmp_path: Path) -> None:
    recipe, ran = _linker_recipe(tmp_path)
    for command in (["run", str(recipe)], ["sweep", str(recipe), "--db", str(tmp_path / "s.db")]):
        proc = tdsched(*command)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"{recipe}:3: compile_flags[0]: refused" in proc.stderr
        assert "--allow-unsafe-flags" in proc.stderr
    assert not ran.exists()


@pytest.mark.usefixtures("iree")
def test_the_users_grant_reaches_the_build(tmp_path: Path) -> None:
    """--allow-unsafe-flags is the user's own choice: the flag then goes to iree-compile
    (here a linker that records that it ran, and fails the build)."""
    recipe, ran = _linker_recipe(tmp_path)
    proc = tdsched("run", str(recipe), "--no-time", "--allow-unsafe-flags")
    assert "refused" not in proc.stderr
    assert ran.exists(), proc.stderr + proc.stdout


@pytest.mark.usefixtures("iree")
def test_a_sweeps_workers_load_the_recipe_with_the_users_grant(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        _with(
            """\
            parameters: {T: 8}
            space: {T: [8, 16]}
            compile_flags: [--mlir-disable-threading]
            kernels:
              - name: k
                match: {op: linalg.matmul}
                schedule:
                  - tile: {sizes: ["${T}", "${T}", 0], loop: forall, mapping: workgroup}
            """
        )
    )
    db = tmp_path / "s.db"
    proc = tdsched("sweep", str(recipe), "--db", str(db), "--repeats", "2", "--allow-unsafe-flags")
    assert proc.returncode == 0, proc.stderr
    assert "--allow-unsafe-flags" in proc.stdout  # the printed run command repeats the grant


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o755), (0o077, 0o700), (0o027, 0o750)])
def test_the_compile_script_follows_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        script = write_compile_script(tmp_path, ["iree-compile", "in.mlir", "-o", "x y.vmfb"])
    finally:
        os.umask(old)
    assert stat.S_IMODE(script.stat().st_mode) == mode
    assert script.read_text().splitlines()[-1] == "exec iree-compile in.mlir -o 'x y.vmfb'"


RUNTIME_CODE = {
    "util op": "%0 = util.optimization_barrier %a : tensor<4xf32>\n  return %0 : tensor<4xf32>",
    "hal attribute": (
        '%0 = arith.addf %a, %a {hal.executable.objects = [#hal.executable.object<{path = "x.o"}>]}'
        " : tensor<4xf32>\n  return %0 : tensor<4xf32>"
    ),
}


@pytest.mark.parametrize("case", sorted(RUNTIME_CODE))
def test_a_workload_file_may_hold_a_computation_not_runtime_code(tmp_path: Path, case: str) -> None:
    """An MLIR workload could carry HAL executables with object files to link and run:
    the ops and attributes of IREE's runtime layer are refused, a computation passes."""
    body = RUNTIME_CODE[case]
    (tmp_path / "w.mlir").write_text(
        f"func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {{\n  {body}\n}}\n"
    )
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: file_workload\nworkload: {file: w.mlir}\n")
    with pytest.raises(RecipeError, match=r"w.mlir:2:\d+: .*a workload file holds a computation"):
        plan(load(str(recipe)))
    (tmp_path / "w.mlir").write_text(
        "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = arith.addf %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    )
    assert plan(load(str(recipe))).workload.function == "f"
