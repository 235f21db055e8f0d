"""Bad input from the command line: one clear line naming the file (and line), exit status
2, never a Python traceback (issue: product hardening)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_inprocess import Outcome

PYTHON_RECIPES = {
    "raises.py": ('raise RuntimeError("boom")\n', r"raises.py:1: .*RuntimeError: boom"),
    "syntax.py": ("def f(:\n", r"syntax.py:1: .*SyntaxError"),
    "nul.py": ("x = 1\x00\n", r"nul.py(:1)?: .*null bytes"),
    "exits.py": ("import sys\nsys.exit(7)\n", r"exits.py:2: .*called sys.exit\(7\)"),
    "bad_step.py": (
        "from tdsched.schedules.python_api import RecipeBuilder, generator\n"
        'r = RecipeBuilder("x", workload=generator("matmul", M=8, N=8, K=8))\n'
        "r.graph.mmt4d([4, 4])\n",
        r"bad_step.py:3: mmt4d.tile: expected the inner tile \[M0, N0, K0\], got 2 sizes",
    ),
}


@pytest.mark.parametrize("command", ["show", "apply", "compile", "run", "sweep"])
@pytest.mark.parametrize("name", sorted(PYTHON_RECIPES))
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


def test_python_recipe_names_are_checked_too() -> None:
    from tdsched.schedules.errors import RecipeError
    from tdsched.schedules.python_api import RecipeBuilder, generator

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
