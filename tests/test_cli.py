"""The tdsched command line, run as a subprocess like a user would."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import tdsched as run_tdsched
from tdsched.schedules.cli.args import run_command
from tdsched.schedules.compile.build_target import BuildTarget

SMALL = ["--param", "M=128", "--param", "N=128", "--param", "K=128"]
"""A shape whose shape-table entry schedules the matmul (at 256^3 IREE's pipeline runs)."""


def tdsched(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_tdsched(*args, check=check)


@pytest.mark.process
def test_help_explains_commands() -> None:
    out = tdsched("--help").stdout
    for command in ("show", "apply", "compile", "run"):
        assert command in out
    assert "--param NAME=VALUE" in tdsched("run", "--help").stdout


@pytest.mark.process
def test_show_output_parses_with_iree_opt(iree_opt: str, tmp_path: Path) -> None:
    path = tmp_path / "show.mlir"
    path.write_text(tdsched("show", "matmul_x86").stdout)
    proc = subprocess.run(
        [iree_opt, "--split-input-file", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and "error" not in proc.stderr, proc.stderr


@pytest.mark.process
def test_bad_recipe_gives_file_line_error_without_traceback(tmp_path: Path) -> None:
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(
        "name: bad\nworkload: {generator: matmul, args: {M: 8, N: 8, K: 8}}\nkernels:\n  - name: k\n    match: {op: linalg.matmul}\n    schedule:\n      - tile: {sizes: [8, 8], loop: forall}\n"
    )
    proc = tdsched("show", str(recipe), check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert (
        f"tdsched: error: {recipe}:7: kernels[0].schedule[0].tile: tile: 2 tile sizes given for linalg.matmul, which has 3 loops"
        in proc.stderr
    )


@pytest.mark.process
def test_unknown_recipe_lists_shipped_ones() -> None:
    proc = tdsched("show", "no_such_recipe", check=False)
    assert (
        proc.returncode == 2 and "shipped recipes:" in proc.stderr and "matmul_x86" in proc.stderr
    )


@pytest.mark.usefixtures("iree", "no_compile_cache")
def test_compile_print_command_reproduces_the_build(tmp_path: Path) -> None:
    out = tmp_path / "mm.vmfb"
    proc = tdsched("compile", "matmul_x86", "-o", str(out), "--print-command", *SMALL)
    command = shlex.split(proc.stdout.strip())
    assert command[0].endswith("iree-compile") and out.exists()
    assert f"--iree-codegen-transform-dialect-library={tmp_path / 'mm.kernels.mlir'}" in command
    rebuilt = tmp_path / "again.vmfb"
    command = [f"-o={rebuilt}" if c.startswith("-o=") else c for c in command]
    subprocess.run(command, check=True, capture_output=True)
    assert rebuilt.read_bytes() == out.read_bytes()


@pytest.mark.usefixtures("iree", "no_compile_cache")
def test_compile_keeps_intermediate_files_out_of_the_output_folder(tmp_path: Path) -> None:
    """Kernel-level fuse_ext plans on probe compiles: their files go to a temporary folder,
    kept with --keep-temps beside IREE's per-dispatch files; the .vmfb is the same."""
    out = tmp_path / "mm.vmfb"
    size = ["--param", "M=64", "--param", "N=64", "--param", "K=64"]
    command = ["compile", "matmul_bias_relu_fuse_ext_x86", *size, "-o", str(out)]
    written = ["mm.input.mlir", "mm.kernels.mlir", "mm.vmfb"]
    plain = tdsched(*command)
    assert sorted(p.name for p in tmp_path.iterdir()) == written
    assert "kept" not in plain.stderr
    built = out.read_bytes()
    kept = tdsched(*command, "--keep-temps")
    line = next(ln for ln in kept.stderr.splitlines() if ln.startswith("tdsched: build files"))
    temps = Path(line.removeprefix("tdsched: build files kept in "))
    assert sorted(p.name for p in tmp_path.iterdir()) == written
    assert out.read_bytes() == built
    assert (temps / "probe0.kernels.mlir").is_file()
    assert any((temps / "executables").glob("*.s")) and any((temps / "executables").glob("*.o"))
    shutil.rmtree(temps)


@pytest.mark.usefixtures("iree")
def test_run_json_reports_status_error_and_speedup() -> None:
    proc = tdsched("run", "matmul_x86", "--json", "--repeats", "2", *SMALL)
    report = json.loads(proc.stdout)
    assert (
        report["status"] == "ok" and report["recipe"] == "matmul_x86" and report["target"] == "x86"
    )
    for key in ("max_abs_error", "time_ms", "baseline_ms", "speedup", "iree_version", "threads"):
        assert report[key] is not None, key
    # the median of per-round ratios, inside its interval, and between the ratios the
    # fastest and slowest timings allow (a loaded machine moves the ratio of the medians
    # away from it: two rounds measured 2.57x against 0.77x beside a tune)
    low, high = report["speedup_interval"]
    assert low <= report["speedup"] <= high
    times, baseline = report["time_ms"], report["baseline_ms"]
    assert baseline["min"] / times["max"] <= report["speedup"] <= baseline["max"] / times["min"]


BROKEN = """\
name: broken
workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
kernels:
  - name: mm
    match: {op: linalg.matmul}
    schedule:
      - match: {op: linalg.fill, as: fill}
      - tile: {target: fill, sizes: [16, 16], loop: forall, mapping: workgroup, loops: wg}
      - fuse_into: {producer: root, loop: wg}
"""


@pytest.mark.usefixtures("iree")
def test_run_reports_compile_failure_as_status_compile_failed(tmp_path: Path) -> None:
    # The matmul does not feed the fill's loop: the strategy fails inside iree-compile.
    recipe = tmp_path / "broken.yaml"
    recipe.write_text(BROKEN)
    proc = tdsched("run", str(recipe), "--json", "--no-time", check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["status"] == "compile_failed"
    assert "iree-compile failed" in report["error"]
    # IREE's diagnostic names the recipe step (every transform op carries its location).
    assert "broken.yaml:9:1: error: could not find next producer to fuse" in report["error"]


@pytest.mark.process
def test_invalid_parameter_value_is_a_clear_error() -> None:
    args = ["--param", "LAYOUT=rowmajor", "--param", "TK=-4"]  # the kernel schedule's tile
    proc = tdsched("run", "matmul_x86", *args, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "matmul_x86.yaml:" in proc.stderr and "tile sizes must be >= 0" in proc.stderr


@pytest.mark.usefixtures("iree")
def test_apply_shows_schedule_and_tile_parameter_changes_kernel() -> None:
    # TN is given: at 128^3 the shape table's entry would set it otherwise.
    small = tdsched("apply", "matmul_x86", *SMALL, "--param", "TM=32", "--param", "TN=128").stdout
    large = tdsched("apply", "matmul_x86", *SMALL, "--param", "TM=128", "--param", "TN=128").stdout
    assert "// module after the graph schedule" in small
    assert "scf.forall (%arg0, %arg1) in (4, 1)" in small  # 128/32 x 128/128 workgroups
    assert "scf.forall (%arg0, %arg1) in (1, 1)" in large
    kernel = small.split("after its schedule steps")[1]
    # reduction-aware: the zero init is written before the k loop, never inside it
    assert kernel.index("vector.transfer_write %cst") < kernel.index("vector.contract")


@pytest.mark.process
def test_version_names_tdsched_and_iree() -> None:
    out = tdsched("--version").stdout
    assert out.startswith("tdsched ") and "IREE 3.13" in out


@pytest.mark.process
def test_list_shows_every_shipped_recipe_with_targets() -> None:
    from tdsched.schedules.frontends.shipped import shipped_recipe_names

    rows = json.loads(tdsched("list", "--json").stdout)
    assert [r["name"] for r in rows] == shipped_recipe_names()
    assert all(r["targets"] and r["description"] for r in rows), rows
    by_name = {r["name"]: r for r in rows}
    assert by_name["matmul_x86"]["targets"] == ["x86"] and by_name["matmul_x86"]["sweepable"]
    table = tdsched("list").stdout.splitlines()
    assert table[0].split() == ["recipe", "targets", "sweep", "description"]
    assert any(line.startswith("matmul_vulkan ") and " vulkan " in line for line in table)


CRASHING_RUN = """\
import os, signal
import tdsched.schedules.measure.evaluation as evaluation
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator

def crash(*args, **kwargs):  # stands in for a module that writes out of bounds
    os.kill(os.getpid(), signal.SIGSEGV)

evaluation.Reference.make = staticmethod(crash)
r = RecipeBuilder("crashes", workload=generator("matmul", M=64, N=64, K=64))
r.kernel("mm", match=Match(kind="contraction")).root.tile([16, 16, 0], loop="forall", mapping="workgroup")
recipe = r.build()
"""


@pytest.mark.usefixtures("iree")
def test_run_reports_a_crashing_module_as_crashed(tmp_path: Path) -> None:
    recipe = tmp_path / "crashes.py"
    recipe.write_text(CRASHING_RUN)
    proc = tdsched("run", str(recipe), "--json", "--no-time", check=False)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "crashed" and report["recipe"] == "crashes"
    assert report["error"].startswith("while building and checking, the process died")
    assert "killed by SIGSEGV" in report["error"]
    text = tdsched("run", str(recipe), "--no-time", check=False).stdout
    assert "status   crashed" in text and "SIGSEGV" in text


@pytest.mark.usefixtures("iree")
def test_keep_temps_keeps_a_build_whose_compile_command_reruns(tmp_path: Path) -> None:
    proc = tdsched("run", "matmul_x86", *SMALL, "--no-time", "--keep-temps", "--json")
    kept = Path(proc.stderr.strip().rsplit(" ", 1)[-1])
    report = json.loads(proc.stdout)
    assert report["status"] == "ok" and kept.is_dir()
    rerun = subprocess.run(report["compile_command"], capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert any(kept.glob("*.vmfb")) and any(kept.glob("*.kernels.mlir"))
    shutil.rmtree(kept)


def _complete(line: str, tmp_path: Path) -> list[str]:
    """What bash completion offers for ``line`` (argcomplete's protocol, as the shell
    hook runs it)."""
    out = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
    }
    subprocess.run(
        [sys.executable, "-m", "tdsched.schedules.cli.main"],
        env=env,
        capture_output=True,
        check=False,
        cwd=tmp_path,
    )
    return [word.strip() for word in out.read_text().split("\n")]


@pytest.mark.process
def test_shell_completion_offers_commands_options_and_recipes(tmp_path: Path) -> None:
    assert "sweep" in _complete("tdsched sw", tmp_path)
    assert "--threads" in _complete("tdsched run matmul_x86 --thr", tmp_path)
    assert _complete("tdsched run matmul_x8", tmp_path) == ["matmul_x86", "matmul_x86_py"]


_IMPORTED = """
import sys
from tdsched.schedules.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:  # --help
    pass
commands = sorted(m for m in sys.modules if m.startswith("tdsched.schedules.cli.") and m.endswith("_command"))
print(commands, "iree.compiler.ir" in sys.modules)
"""


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "imported"),
    [
        (["--version"], "[] False"),
        (["peak", "--help"], "['tdsched.schedules.cli.peak_command'] True"),
        (["list"], "['tdsched.schedules.cli.list_command'] False"),
    ],
)
def test_a_command_line_imports_only_what_its_command_needs(args: list[str], imported: str) -> None:
    # `tdsched --version` once took 1.3-7 s: every command's module (and with them the
    # compiler's bindings) was imported to build the parser.
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *args], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip().splitlines()[-1] == imported, done.stderr


@pytest.mark.usefixtures("iree")
def test_verbose_prints_each_iree_compile_command(tmp_path: Path) -> None:
    out = tmp_path / "mm.vmfb"
    proc = tdsched("-v", "compile", "matmul_x86", *SMALL, "-o", str(out))
    printed = [ln for ln in proc.stderr.splitlines() if ln.startswith("tdsched: iree-compile: ")]
    assert len(printed) == 1 and str(out) in printed[0]
    assert (
        "tdsched: iree-compile:"
        not in tdsched("compile", "matmul_x86", *SMALL, "-o", str(out)).stderr
    )


@pytest.mark.parametrize("command", ["show", "sweep"])
@pytest.mark.process
def test_gpu_is_refused_for_an_x86_build(command: str, tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "s.db")] if command == "sweep" else []
    proc = tdsched(command, *db, "matmul_x86", "--gpu", "ampere", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--gpu ampere names the Vulkan GPU to build for" in proc.stderr
    assert "--target vulkan" in proc.stderr


@pytest.mark.process
def test_an_x86_cpu_is_refused_for_a_vulkan_build() -> None:
    proc = tdsched("show", "matmul_vulkan", "--cpu", "haswell", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "(haswell) choose the x86 CPU to build for, but this build targets vulkan" in (
        proc.stderr
    )
    assert "--target x86" in proc.stderr


@pytest.mark.usefixtures("iree")
def test_gpu_builds_for_that_vulkan_target_and_refuses_one_iree_does_not_know(
    tmp_path: Path,
) -> None:
    out = tmp_path / "mm.vmfb"
    proc = tdsched("compile", "matmul_vulkan", "-o", str(out), "--gpu", "ampere", "--print-command")
    assert "--iree-vulkan-target=ampere" in shlex.split(proc.stdout.strip()) and out.exists()
    proc = tdsched("compile", "matmul_vulkan", "-o", str(out), "--gpu", "h100", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "IREE has no Vulkan target 'h100' (--gpu)" in proc.stderr
    assert "(an H100: ampere)" in proc.stderr


def test_the_run_options_a_written_recipe_needs_are_those_not_at_their_defaults() -> None:
    assert BuildTarget("x86").run_flags() == []
    assert BuildTarget("vulkan", threads=1).run_flags() == []
    assert BuildTarget("x86", "haswell", "+fma", threads=1).run_flags() == (
        ["--cpu", "haswell", "--cpu-features=+fma", "--threads", "1"]
    )
    assert BuildTarget("vulkan", gpu="ampere").run_flags() == ["--gpu", "ampere"]


def test_a_printed_run_command_is_shell_quoted() -> None:
    """A path or value holding shell syntax is pasted as one word, never run."""
    options = BuildTarget("x86", "haswell", "+fma,$(touch pwned)").run_flags()
    line = run_command("my dir/$(rm -rf x).yaml", options)
    assert shlex.split(line) == [
        "tdsched",
        "run",
        "my dir/$(rm -rf x).yaml",
        "--cpu",
        "haswell",
        "--cpu-features=+fma,$(touch pwned)",
    ]
