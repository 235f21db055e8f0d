"""Bad input from the command line: one clear line naming the file (and line), exit status
2, never a Python traceback (issue: product hardening)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_inprocess import Outcome
from tdsched.schedules.cli.main import main

PYTHON_RECIPES = {
    "raises.py": ('raise RuntimeError("boom")\n', r"raises.py:1: .*RuntimeError: boom"),
    "syntax.py": ("def f(:\n", r"syntax.py:1: .*SyntaxError"),
    "nul.py": ("x = 1\x00\n", r"nul.py(:1)?: .*null bytes"),
    "exits.py": ("import sys\nsys.exit(7)\n", r"exits.py:2: .*called sys.exit\(7\)"),
    "bad_step.py": (
        "from tdsched.schedules.frontends.python_api import RecipeBuilder, generator\n"
        'r = RecipeBuilder("x", workload=generator("matmul", M=8, N=8, K=8))\n'
        "r.graph.mmt4d([4, 4])\n",
        r"bad_step.py:3: mmt4d.tile: expected the inner tile \[M0, N0, K0\], got 2 sizes",
    ),
}


@pytest.mark.parametrize("command", ["show", "apply", "compile", "run", "sweep"])
@pytest.mark.parametrize("name", sorted(PYTHON_RECIPES))
@pytest.mark.process
def test_a_failing_python_recipe_is_one_line_naming_its_line(
    tdsched: Callable[..., Outcome], tmp_path: Path, name: str, command: str
) -> None:
    text, expected = PYTHON_RECIPES[name]
    recipe = tmp_path / name
    recipe.write_text(text)
    extra = ["-o", str(tmp_path / "x.vmfb")] if command == "compile" else []
    if command == "sweep":
        extra = ["--db", str(tmp_path / "s.db")]
    proc = tdsched(command, str(recipe), *extra)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("tdsched: error: ")
    assert re.search(expected, line), line


@pytest.mark.parametrize("suffix", [".yaml", ".py"])
def test_a_file_that_is_not_utf8_is_named(
    tdsched: Callable[..., Outcome], tmp_path: Path, suffix: str
) -> None:
    recipe = tmp_path / f"latin{suffix}"
    recipe.write_bytes(b"x = 1\n# caf\xe9\n")
    proc = tdsched("show", str(recipe))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"latin{suffix}:2:" in proc.stderr


def test_a_baseline_that_is_not_utf8_is_named(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    baseline = tmp_path / "perf.yaml"
    baseline.write_bytes(b"entries:\n  - recipe: caf\xe9\n")
    proc = tdsched("regress", str(baseline))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "perf.yaml:2: the baseline file is not UTF-8 text (byte 0xe9)" in proc.stderr


@pytest.mark.parametrize("name", ["../escaped", "a/b", "tab\there", "", ".hidden"])
def test_recipe_names_that_would_escape_a_folder_are_refused(
    tdsched: Callable[..., Outcome], tmp_path: Path, name: str
) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: {name!r}\nworkload: {{generator: matmul, args: {{M: 8, N: 8, K: 8}}}}\n"
    )
    proc = tdsched("sweep", str(recipe), "--db", str(tmp_path / "s.db"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "r.yaml:1: name:" in proc.stderr
    assert not (tmp_path.parent / "escaped.x86.best.yaml").exists()


def test_a_recipe_name_too_long_for_a_file_name_is_refused_at_its_line(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    # 300 characters: every sweep candidate failed with "File name too long"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: {'n' * 300}\nworkload: {{generator: matmul, args: {{M: 8, N: 8, K: 8}}}}\n"
    )
    proc = tdsched("show", str(recipe))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "r.yaml:1: name: 'nnnnnnnnnnnnnnnnnnnn'... is 300 characters; a recipe name has " in (
        proc.stderr
    )
    assert "at most 100" in proc.stderr and proc.stderr.count("\n") == 1
    recipe.write_text(recipe.read_text().replace("n" * 300, "n" * 100))
    assert tdsched("show", str(recipe)).returncode == 0


def test_python_recipe_names_are_checked_too() -> None:
    from tdsched.schedules.base.errors import RecipeError
    from tdsched.schedules.frontends.python_api import RecipeBuilder, generator

    with pytest.raises(RecipeError, match="cannot name a recipe"):
        RecipeBuilder("a/b", workload=generator("matmul", M=8, N=8, K=8))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["run", "matmul_x86", "--threads", "0"],
            "argument --threads: expected an integer >= 1, got 0",
        ),
        (["sweep", "matmul_x86", "--jobs", "0"], "argument --jobs: expected an integer >= 1"),
        (["sweep", "matmul_x86", "--compile-timeout", "-1"], "expected a number > 0, got -1"),
        (["sweep", "matmul_x86", "--budget", "-2"], "argument --budget: expected a number > 0"),
        (
            ["sweep", "matmul_x86", "--race", "0"],
            "argument --race/--confirm: expected an integer >= 1",
        ),
        (
            ["sweep", "matmul_x86", "--sample-ms", "0"],
            "argument --sample-ms: expected a number > 0",
        ),
        (["check", "a.mlir", "b.mlir", "--atol", "-1"], "argument --atol: expected a number >= 0"),
        (
            ["check", "a.mlir", "b.mlir", "--rtol=-1e-3"],
            "argument --rtol: expected a number >= 0",
        ),
        (["regress", "--time-cap", "0"], "argument --time-cap: expected a number > 0"),
        (["regress", "--precision", "1"], "--precision: expected a number above 0 and below 1"),
        (
            ["run", "matmul_x86", "--param", f"M={10**20}"],
            f"--param: M={10**20}: M does not fit in 64 bits",
        ),
        (
            ["sweep", "matmul_x86", "--shape", f"M={2**63},N=8,K=8"],
            f"argument --shape: M={2**63}: M does not fit in 64 bits",
        ),
    ],
)
def test_out_of_range_numbers_are_refused_when_parsed(
    tdsched: Callable[..., Outcome], args: list[str], expected: str
) -> None:
    proc = tdsched(*args)
    assert proc.returncode == 2 and expected in proc.stderr, proc.stderr


def test_sweep_db_that_is_not_a_database_is_one_line(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    for db, expected in [
        (text, "notes.txt: not a tdsched results database"),
        (folder, "folder: is a folder; give the path of a file"),
        (text / "x.db", "x.db: " + str(text) + " is a file, not a folder"),
    ]:
        proc = tdsched("sweep", "matmul_x86", "--db", str(db))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert expected in proc.stderr
    assert text.read_text() == "hello\n"


@pytest.mark.process
def test_a_workload_too_large_for_the_machine_is_refused_with_the_figure(
    tdsched: Callable[..., Outcome],
) -> None:
    proc = tdsched("run", "matmul_x86", "--param", "M=1000000000")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "its tensors need about 29.8 TiB" in proc.stderr and "use smaller sizes" in proc.stderr


def test_memory_estimate_counts_arguments_and_results() -> None:
    from tdsched.recipes.workloads import generate
    from tdsched.targets.workload import WorkloadError, check_memory, memory_estimate

    mm = generate("matmul", {"M": 64, "N": 32, "K": 16, "dtype": "f32"})
    elements = 64 * 16 + 16 * 32 + 64 * 32
    assert memory_estimate(mm) == elements * (2 * 4 + 8)
    check_memory(mm, available=10 * memory_estimate(mm))
    with pytest.raises(WorkloadError, match="need about"):
        check_memory(mm, available=memory_estimate(mm))


def test_a_misspelled_op_is_refused_before_compiling_with_the_ops_present(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    from tdsched.recipes import RECIPES_DIR

    text = (RECIPES_DIR / "matmul_x86.yaml").read_text()
    recipe = tmp_path / "typo.yaml"
    recipe.write_text(text.replace("{op: linalg.fill, as: fill}", "{op: linalg.fil, as: fill}"))
    # rowmajor: the kernel schedule (the shape table packs the default 1024^3)
    out = str(tmp_path / "x.vmfb")
    proc = tdsched("compile", str(recipe), "--param", "LAYOUT=rowmajor", "-o", out)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "kernels[0].schedule[0].match.op: no operation is called 'linalg.fil'" in proc.stderr
    assert "did you mean linalg.fill" in proc.stderr
    assert "ops in the workload: linalg.fill, linalg.matmul" in proc.stderr
    assert not (tmp_path / "x.vmfb").exists()


CONFIG_RECIPE = """\
name: cfg
workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
targets: [x86]
kernels:
  - name: mm
    match: {kind: contraction}
    config:
      pipeline: CPUDoubleTiling
      tile_sizes: {workgroup: [16, 16, 0], vector: [4, 16, 0], reduction: [0, 0, 4]}
"""


@pytest.mark.parametrize("command", ["show", "apply"])
def test_a_pipeline_iree_does_not_know_is_named_with_the_ones_it_does(
    tdsched: Callable[..., Outcome], tmp_path: Path, command: str
) -> None:
    recipe = tmp_path / "cfg.yaml"
    recipe.write_text(CONFIG_RECIPE)
    out = tdsched(command, str(recipe))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "cfg.yaml:5: kernels[0]: config: IREE does not accept it:" in out.stderr
    assert "DoubleTilingExpert, ConvTileAndDecomposeExpert" in out.stderr


# tdsched tasks and tune (issue: product hardening, items 5 to 8)


def _one_error_line(proc: Outcome) -> str:
    """The one line a refused command wrote (exit status 2, no traceback)."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()[-1:]
    return line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tune", "--budget", "inf"], "argument --budget: expected a number of minutes > 0, at"),
        (["tune", "--budget", "1e308"], "argument --budget: expected a number of minutes > 0"),
        (["tune", "--budget", "nan"], "argument --budget: expected a number of minutes > 0, at"),
        (["tune", "--min-share", "2"], "argument --min-share: expected a number from 0 to 1"),
        (["tune", "--min-share", "-1"], "argument --min-share: expected a number from 0 to 1"),
        (["tune", "--gpu", ""], "argument --gpu: expected the name of one of IREE's Vulkan"),
        (["tasks", "--gpu", ""], "argument --gpu: expected the name of one of IREE's Vulkan"),
        (["sweep", "--compile-timeout", "nan"], "expected a number > 0, got nan (not a finite"),
    ],
)
def test_tune_and_tasks_options_are_checked_when_parsed(
    tdsched: Callable[..., Outcome], tmp_path: Path, args: list[str], expected: str
) -> None:
    """Before: ``--budget inf`` overflowed after the profile, ``nan`` failed late, the
    others were taken."""
    out = tmp_path / "out"
    extra = ["--out", str(out)] if args[0] == "tune" else []
    proc = tdsched(args[0], "no-such-model.onnx", *args[1:], *extra)
    assert expected in _one_error_line(proc)
    assert not out.exists()


def test_a_shape_that_repeats_a_name_or_names_a_swept_parameter_is_refused(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    for shape, expected in [
        ("M=64,M=128", "argument --shape: 'M=64,M=128': M is given twice"),
        ("TM=32", "--shape TM: matmul_x86's space sweeps TM; a shape sets the parameters it"),
        ("FOO=32", "--shape FOO: matmul_x86 has no parameter FOO;"),
    ]:
        proc = tdsched("sweep", "matmul_x86", "--shape", shape, "--db", str(db))
        assert expected in _one_error_line(proc)
    assert not db.exists()


def test_an_onnx_opset_newer_than_onnx_knows_is_refused(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    from onnx_models import relu_model

    model = tmp_path / "future.onnx"
    relu_model(model, [4, 4], opset=999)
    line = _one_error_line(tdsched("lower", str(model)))
    assert "future.onnx: opset 999 is newer than any this onnx package knows" in line


@pytest.mark.parametrize("command", ["tune", "tasks"])
@pytest.mark.process
def test_a_model_too_large_to_profile_is_refused_with_the_figure(
    tdsched: Callable[..., Outcome], tmp_path: Path, command: str
) -> None:
    """Before: numpy's MemoryError traceback while making the profile's inputs."""
    from onnx_models import relu_model

    model = tmp_path / "huge.onnx"
    relu_model(model, [1_000_000, 1_000_000])
    extra = ["--out", str(tmp_path / "out")] if command == "tune" else []
    line = _one_error_line(tdsched(command, str(model), *extra))
    assert "huge: its tensors need about" in line and "use smaller sizes" in line


@pytest.mark.process
def test_an_onnx_graph_name_that_is_no_symbol_names_a_plain_entry_function(
    tmp_path: Path,
) -> None:
    from onnx_models import relu_model
    from tdsched.recipes.workloads.lowered import file_workload

    for name, function in [("torch-jit-export", "torch_jit_export"), ("my graph", "my_graph")]:
        relu_model(tmp_path / "m.onnx", [4, 4], name)
        assert file_workload(tmp_path / "m.onnx").function == function


@pytest.mark.parametrize(
    ("name", "suffix"), [("torch-jit-export", ".onnx"), ("my graph", ".onnx"), ("m", ".mlir")]
)
def test_tasks_are_found_whatever_the_graph_or_function_is_called(
    tdsched: Callable[..., Outcome],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    iree: str,
    name: str,
    suffix: str,
) -> None:
    """Before: 0 tasks, exit 0, no warning (IREE names the dispatches of a function
    ``@"torch-jit-export"`` ``torch-jit-export_dispatch_0...``, which the census did not
    read)."""
    import json

    from onnx_models import relu_model

    model = tmp_path / "m.onnx"
    relu_model(model, [4, 4], name)
    if suffix == ".mlir":  # a linalg file whose function name must be quoted
        assert tdsched("lower", str(model), "-o", str(tmp_path / "m.mlir")).returncode == 0
        model = tmp_path / "m.mlir"
        model.write_text(model.read_text().replace("func.func @m(", 'func.func @"my-fn"('))
        assert '@"my-fn"' in model.read_text()
    assert main(["tasks", str(model), "--no-time", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [task["layers"] for task in found["tasks"]] == [["act"]]


@pytest.mark.parametrize("command", ["tune", "tasks"])
def test_a_model_without_tasks_is_an_error(
    tdsched: Callable[..., Outcome], tmp_path: Path, iree: str, command: str
) -> None:
    """Before: tasks listed none and exited 0; tune died of a ProfileError traceback."""
    from onnx_models import identity_graph

    model = tmp_path / "nothing.onnx"
    identity_graph(model)
    extra = ["--out", str(tmp_path / "out"), "--jobs", "1"] if command == "tune" else []
    line = _one_error_line(tdsched(command, str(model), *extra))
    assert "nothing: IREE's build of it has no dispatch that computes" in line


def test_tasks_for_a_gpu_iree_does_not_know_says_which_it_knows(
    tdsched: Callable[..., Outcome], tmp_path: Path, iree: str
) -> None:
    """Before: iree-compile's stack dump."""
    from onnx_models import relu_model

    model = tmp_path / "m.onnx"
    relu_model(model, [4, 4])
    proc = tdsched("tasks", str(model), "--target", "vulkan", "--gpu", "nosuch", "--no-time")
    line = _one_error_line(proc)
    assert "IREE has no Vulkan target 'nosuch' (--gpu): name an architecture" in line


def test_tune_for_a_gpu_iree_does_not_know_is_refused_before_any_work(
    tdsched: Callable[..., Outcome], tmp_path: Path, iree: str
) -> None:
    """Before: the model-rewrite race ran (and failed) first, the clear error came after."""
    out = tmp_path / "out"
    proc = tdsched("tune", "small_cnn", "--target", "vulkan", "--gpu", "nosuch", "--out", str(out))
    line = _one_error_line(proc)
    assert "IREE has no Vulkan target 'nosuch' (--gpu): name an architecture" in line
    assert not out.exists()  # refused before the tune made its folder


def test_a_model_file_name_with_a_space_tunes_into_a_recipe_tdsched_loads(
    tdsched: Callable[..., Outcome], tmp_path: Path, iree: str
) -> None:
    from onnx_models import relu_model
    from tdsched.schedules.frontends.loading import load

    model = tmp_path / "my model.onnx"
    relu_model(model, [4, 4])
    out = tmp_path / "out"
    args = ["--out", str(out), "--budget", "0.001", "--jobs", "1", "--rounds", "1", "--no-check"]
    assert tdsched("tune", str(model), *args).returncode == 0
    assert load(str(out / "my_model.tuned.yaml")).name == "my_model_tuned"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my model", "my_model"),
        ("net.v2", "net.v2"),
        ("x..y", "x.y"),
        ("a/b", "a_b"),
        ("-x", "x"),
        ("..", "recipe"),
        ("\u00e9", "recipe"),
        ("", "recipe"),
    ],
)
def test_a_recipe_name_is_made_from_any_text(text: str, expected: str) -> None:
    from tdsched.schedules.dsl.recipe import name_problem, recipe_name

    assert recipe_name(text) == expected and name_problem(expected) is None


def test_yaml_nested_too_deeply_is_one_line_naming_the_file(
    tdsched: Callable[..., Outcome], tmp_path: Path
) -> None:
    # PyYAML composes recursively: these were RecursionError tracebacks. Any depth past
    # a few hundred shows it; PyYAML takes seconds to scan 5,000 levels.
    depth = 600
    recipe, baseline = tmp_path / "deep.yaml", tmp_path / "deep_perf.yaml"
    recipe.write_text(f"name: deep\nworkload: {'[' * depth}{']' * depth}\n")
    baseline.write_text(f"entries: {'[' * depth}{']' * depth}\n")
    for command, path, what in [("show", recipe, "YAML"), ("regress", baseline, "YAML/JSON")]:
        proc = tdsched(command, str(path))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr == (
            f"tdsched: error: {path}: not valid {what}: lists or mappings nested too deeply to "
            "read (hundreds of levels); a file needs a few\n"
        )


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        (
            "TM <= " + "1+" * 5_000 + "1",
            "... is 10007 characters; a constraint has at most 1000",
        ),
        ("TM <= " + "1+" * 400 + "1", " is nested more than 100 levels deep; write it flatter"),
    ],
)
def test_a_huge_or_deep_constraint_is_refused_at_its_line(
    tdsched: Callable[..., Outcome], tmp_path: Path, constraint: str, expected: str
) -> None:
    recipe = tmp_path / "c.yaml"
    recipe.write_text(
        "name: c\nworkload: {generator: matmul, args: {M: 8, N: 8, K: 8}}\n"
        "parameters: {TM: 4}\nspace: {TM: [4, 8]}\nconstraints:\n  - TM > 2\n"
        f"  - {constraint}\n"
    )
    proc = tdsched("show", str(recipe))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"tdsched: error: {recipe}:7: constraints[1]: ") and expected in line
    assert len(line) < 2000
