"""Conditional steps and kernel schedules (``when``): left out when their condition on
the parameters is false, said so in ``show``/``run``, refused at load when the condition
names an unknown parameter or does not parse; and the packed layout that matmul_x86's
shape table selects this way, run for real against numpy."""

from __future__ import annotations

import json

import pytest
from cli_process import tdsched
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.dsl.build_names import build_values
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.dsl.recipe import Recipe
from tdsched.schedules.dsl.steps import Mmt4dStep
from tdsched.schedules.frontends.python_api import Match, P, RecipeBuilder, generator
from tdsched.schedules.frontends.yaml_frontend import parse_recipe
from tdsched.targets.cpu_model import BuildCpu
from tdsched.targets.target import BuildGpu

RECIPE = """\
name: t
workload:
  generator: matmul
  args: {M: 64, N: 64, K: 64}
parameters: {LAYOUT: rowmajor, TM: 8}
graph:
  - mmt4d: {tile: [16, 16, 1], when: "LAYOUT == 'packed'"}
kernels:
  - name: mm
    match: {kind: contraction}
    when: "LAYOUT == 'rowmajor'"
    schedule:
      - tile: {sizes: ["${TM}", 16, 0], loop: forall, mapping: workgroup, loops: wg}
      - tile: {sizes: [0, 0, 16], when: "TM >= 16"}
      - vectorize: {}
"""


def test_a_false_condition_leaves_the_step_or_kernel_out_and_says_so() -> None:
    recipe = parse_recipe(RECIPE, "r.yaml")
    rowmajor = resolve(recipe)
    assert rowmajor.graph == ()
    assert [len(k.steps) for k in rowmajor.kernels] == [2]
    assert [s.describe() for s in rowmajor.skipped] == [
        "graph[0] (mmt4d) at r.yaml:7 left out: when \"LAYOUT == 'packed'\" is false",
        "kernel 'mm' schedule[1] (tile) at r.yaml:14 left out: when 'TM >= 16' is false",
    ]
    wide = resolve(recipe, {"TM": 16})
    assert [len(k.steps) for k in wide.kernels] == [3] and len(wide.skipped) == 1
    packed = resolve(recipe, {"LAYOUT": "packed"})
    assert [type(s) for s in packed.graph] == [Mmt4dStep]
    assert packed.kernels == ()
    assert [s.what for s in packed.skipped] == ["kernel 'mm' (kernels[0])"]
    assert packed.applied == ("graph[0] (mmt4d) at r.yaml:7",)
    assert rowmajor.applied == ("kernel 'mm' (kernels[0], 2 steps) at r.yaml:9",)


@pytest.mark.parametrize(
    ("when", "said"),
    [
        ("SHAPE == 'packed'", "names SHAPE, which is not a parameter"),
        ("LAYOUT = 'packed'", "is not a valid expression"),
        ("LAYOUT + 'x' == 'packedx'", "a 'string' only as a side of a comparison"),
    ],
)
def test_a_bad_condition_is_refused_at_load_naming_its_line(when: str, said: str) -> None:
    text = RECIPE.replace("\"LAYOUT == 'rowmajor'\"", json.dumps(when))
    with pytest.raises(RecipeError) as caught:
        parse_recipe(text, "r.yaml")
    message = str(caught.value)
    assert message.startswith("r.yaml:9: kernels[0].when: kernel 'mm': ")
    assert said in message


def _packed_when(condition: str) -> Recipe:
    """RECIPE for x86 and Vulkan, its mmt4d step taken when ``condition`` holds."""
    text = RECIPE.replace("when: \"LAYOUT == 'packed'\"", f"when: {json.dumps(condition)}")
    targets = "args: {M: 64, N: 64, K: 64}\ntargets: [x86, vulkan]"
    return parse_recipe(text.replace("args: {M: 64, N: 64, K: 64}", targets), "r.yaml")


def test_a_condition_reads_the_target_by_the_name_target() -> None:
    recipe = _packed_when("TARGET == 'vulkan'")
    assert resolve(recipe, target="x86").graph == ()
    assert (
        resolve(recipe, target="x86")
        .skipped[0]
        .describe()
        .endswith("left out: when \"TARGET == 'vulkan'\" is false")
    )
    assert [type(s) for s in resolve(recipe, target="vulkan").graph] == [Mmt4dStep]
    with pytest.raises(RecipeError, match=r"r.yaml: parameters.TARGET: TARGET is reserved"):
        parse_recipe(RECIPE.replace("TM: 8}", "TM: 8, TARGET: x86}"), "r.yaml")


AVX2 = BuildCpu("avx2", "haswell")
AVX512 = BuildCpu("avx512", "znver5")


def test_a_condition_reads_the_x86_vector_isa_by_the_name_isa() -> None:
    recipe = _packed_when("ISA == 'avx2'")
    assert [type(s) for s in resolve(recipe, machine=AVX2).graph] == [Mmt4dStep]
    skipped = resolve(recipe, machine=AVX512).skipped[0].describe()
    assert skipped.endswith("left out: when \"ISA == 'avx2'\" is false")
    # a GPU target (and an x86 CPU whose ISA is not known) reads ISA as 'none'
    assert resolve(recipe, target="vulkan").graph == ()
    none = _packed_when("ISA == 'none'")
    assert [type(s) for s in resolve(none, machine=BuildCpu(None, None)).graph] == [Mmt4dStep]
    with pytest.raises(RecipeError, match=r"r.yaml: parameters.ISA: ISA is reserved"):
        parse_recipe(RECIPE.replace("TM: 8}", "TM: 8, ISA: avx2}"), "r.yaml")


def test_a_condition_reads_the_vulkan_gpu_by_the_name_gpu() -> None:
    recipe = _packed_when("GPU == 'ampere'")
    ampere = resolve(recipe, target="vulkan", machine=BuildGpu("ampere"))
    assert [type(s) for s in ampere.graph] == [Mmt4dStep]
    skipped = resolve(recipe, target="vulkan", machine=BuildGpu(None)).skipped[0].describe()
    assert skipped.endswith("left out: when \"GPU == 'ampere'\" is false")
    # IREE's generic Vulkan target reads 'generic', an x86 build 'none'
    generic = _packed_when("GPU == 'generic'")
    assert [type(s) for s in resolve(generic, target="vulkan").graph] == [Mmt4dStep]
    assert [type(s) for s in resolve(_packed_when("GPU == 'none'"), machine=AVX2).graph] == [
        Mmt4dStep
    ]
    with pytest.raises(RecipeError, match=r"r.yaml: parameters.GPU: GPU is reserved"):
        parse_recipe(RECIPE.replace("TM: 8}", "TM: 8, GPU: ampere}"), "r.yaml")


SPACED = RECIPE.replace(
    "parameters: {LAYOUT: rowmajor, TM: 8}", "parameters: {LAYOUT: rowmajor, TM: 8, M0: 16}"
) + (
    "space:\n  M0: [6, 8, 16]\n"
    "constraints:\n  - ISA == 'avx512' or M0 <= 8\n  - TARGET == 'x86'\n"
    "shapes:\n  key: [TM]\n  entries:\n    - {TM: 8, M0: 16}\n    - {TM: 16, M0: 6}\n"
)


def test_constraints_read_the_build_so_one_space_serves_each_isa() -> None:
    recipe = parse_recipe(SPACED, "r.yaml")

    def swept(target: str, cpu: BuildCpu | None) -> list[int | float | str]:
        defaults = recipe.parameter_dict
        return [p[0] for p in recipe.space.enumerate(defaults, build_values(target, cpu)).valid]

    assert swept("x86", AVX512) == [6, 8, 16]
    assert swept("x86", AVX2) == [6, 8]
    assert swept("vulkan", None) == []
    # the nearest rule skips an entry whose tiles break a constraint for this build
    near_8 = {"TM": 9}
    assert dict(resolve(recipe, near_8, machine=AVX512).parameters)["M0"] == 16
    assert dict(resolve(recipe, near_8, machine=AVX2).parameters)["M0"] == 6
    with pytest.raises(RecipeError, match="names CPU, which is not a parameter"):
        parse_recipe(SPACED.replace("TARGET == 'x86'", "CPU == 'x86'"), "r.yaml")


def test_an_empty_condition_is_refused() -> None:
    with pytest.raises(RecipeError, match=r"r.yaml:7: graph\[0\].mmt4d.when: expected a cond"):
        parse_recipe(RECIPE.replace("\"LAYOUT == 'packed'\"", '" "'), "r.yaml")


def test_a_condition_that_cannot_be_evaluated_names_the_step() -> None:
    text = RECIPE.replace('"TM >= 16"', '"LAYOUT > 3"')
    with pytest.raises(
        RecipeError, match=r"r.yaml:14: .*when: kernel 'mm' schedule\[1\] \(tile\): "
    ):
        resolve(parse_recipe(text, "r.yaml"))


def test_python_recipe_conditions_match_yaml() -> None:
    b = RecipeBuilder("t", workload=generator("matmul", M=64, N=64, K=64))
    b.parameters(LAYOUT="rowmajor", TM=8)
    b.graph.step("mmt4d", tile=[16, 16, 1], when="LAYOUT == 'packed'")
    k = b.kernel("mm", match=Match(kind="contraction"), when="LAYOUT == 'rowmajor'")
    k.root.tile([P("TM"), 16, 0], loop="forall", mapping="workgroup")
    k.root.step("tile", sizes=[0, 0, 16], when="TM >= 16")
    k.vectorize()
    built, parsed = b.build(), parse_recipe(RECIPE, "r.yaml")
    assert [s.when for s in built.graph] == [s.when for s in parsed.graph]
    assert [k.when for k in built.kernels] == [k.when for k in parsed.kernels]
    for params in ({}, {"LAYOUT": "packed"}, {"TM": 16}):
        ours, theirs = resolve(built, params), resolve(parsed, params)
        assert [s.what for s in ours.skipped] == [s.what for s in theirs.skipped]


@pytest.mark.integration
@pytest.mark.parametrize(("unpack", "other"), [("separate", "fused"), ("fused", "separate")])
def test_matmul_x86_packed_layout_runs_correct_and_says_the_kernel_was_left_out(
    iree: None, unpack: str, other: str
) -> None:
    """The packed layout (graph mmt4d, no kernel schedule; the unpack in a dispatch of its
    own or in the mmt4d's) on x86 against numpy; the rowmajor kernel schedule it replaces
    and the other mmt4d step are reported as left out, not silently dropped."""
    shape = ("--param", "M=96", "--param", "N=160", "--param", "K=48")
    layout = ("--param", "LAYOUT=packed", "--param", f"UNPACK={unpack}")
    done = tdsched("run", "matmul_x86", *shape, *layout, "--repeats", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and report["reference"] == "numpy"
    step, kernel = report["skipped"]
    assert step.startswith("graph[") and f"UNPACK == '{other}'\" is false" in step
    assert kernel.startswith("kernel 'matmul' (kernels[0]) at ")
    index = 0 if unpack == "separate" else 1
    (applied,) = report["applied"]  # one numbering: the field path's, as in `skipped`
    assert applied.startswith(f"graph[{index}] (mmt4d) at ") and "matmul_x86.yaml:" in applied
    assert "left out: when \"LAYOUT == 'rowmajor'\" is false" in kernel
    shown = tdsched("show", "matmul_x86", *shape, "--param", "LAYOUT=packed")
    assert shown.returncode == 0, shown.stderr
    assert "tdsched: kernel 'matmul' (kernels[0]) at " in shown.stderr
    assert "mmt4d" in shown.stdout and "tdsched_strategy_matmul" not in shown.stdout
