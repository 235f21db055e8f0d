"""Graph rewrites as recipe steps: YAML and Python front ends, option errors, reports,
the shipped graph-rewrite recipes on x86 and Vulkan, baselines and the bandwidth metric."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.pipeline import apply_graph, build, compile_baseline, plan
from tdsched.schedules.dsl.steps import (
    CollapseDimsStep,
    FuseElementwiseExtStep,
    FusePadStep,
    Mmt4dStep,
)
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator
from tdsched.schedules.frontends.yaml_frontend import parse_recipe
from tdsched.schedules.measure.run_report import run

GRAPH = """\
name: g
workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
targets: [x86, vulkan]
baseline: {flags: [--iree-opt-data-tiling]}
compile_flags: [--iree-llvmcpu-enable-ukernels=none]
metrics: [bandwidth]
graph:
  - fuse_elementwise_ext: {shared_input: false, max_operands: 6, ops: {op: linalg.generic}}
  - collapse_dims: {reassociation: [[0], [1, 2]]}
  - collapse_dims: {reassociation: auto}
  - mmt4d: {tile: [16, 16, 1], lower_packs: true}
  - fuse_pad: {}
"""


def _error(text: str, target: str | None = None) -> str:
    with pytest.raises(RecipeError) as info:
        plan(parse_recipe(textwrap.dedent(text), "r.yaml"), target)
    return str(info.value)


def test_yaml_graph_rewrite_steps_load_with_their_options() -> None:
    recipe = parse_recipe(GRAPH, "r.yaml")
    fuse, explicit, auto, mmt4d, pad = recipe.graph
    assert isinstance(fuse, FuseElementwiseExtStep)
    assert (fuse.shared_input, fuse.max_operands, fuse.ops and fuse.ops.op) == (
        False,
        6,
        "linalg.generic",
    )
    assert isinstance(explicit, CollapseDimsStep) and explicit.reassociation == ((0,), (1, 2))
    assert isinstance(auto, CollapseDimsStep) and auto.reassociation is None
    assert isinstance(mmt4d, Mmt4dStep) and mmt4d.tile == (16, 16, 1) and mmt4d.lower_packs
    assert isinstance(pad, FusePadStep) and pad.ops is None
    assert recipe.baseline.flags == ("--iree-opt-data-tiling",)
    assert recipe.compile_flags == ("--iree-llvmcpu-enable-ukernels=none",)
    assert recipe.metrics == ("bandwidth",)


def test_python_front_end_builds_the_same_graph_steps() -> None:
    r = RecipeBuilder(
        "g", workload=generator("matmul", M=64, N=64, K=64), targets=["x86", "vulkan"]
    )
    r.baseline(flags=["--iree-opt-data-tiling"]).metrics("bandwidth")
    r.compile_flags("--iree-llvmcpu-enable-ukernels=none")
    r.graph.fuse_elementwise_ext(shared_input=False, max_operands=6, ops=Match(op="linalg.generic"))
    r.graph.collapse_dims([[0], [1, 2]])
    r.graph.collapse_dims("auto")
    r.graph.mmt4d((16, 16, 1), lower_packs=True)
    r.graph.fuse_pad()
    python, yaml = r.build(), parse_recipe(GRAPH, "r.yaml")

    def strip(recipe: object) -> object:
        return [(type(s), {k: v for k, v in vars(s).items() if k != "where"}) for s in recipe.graph]  # type: ignore[attr-defined]

    assert strip(python) == strip(yaml)
    assert python.baseline.flags == yaml.baseline.flags and python.metrics == yaml.metrics
    assert python.compile_flags == yaml.compile_flags


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("max_operands: 6", "max_operands: 1"),
            "r.yaml:8: graph[0].fuse_elementwise_ext.max_operands: a fused op has at least 2 operands",
        ),
        (
            ("[[0], [1, 2]]", "three"),
            "r.yaml:9: graph[1].collapse_dims.reassociation: expected 'auto' or a list of loop groups",
        ),
        (
            ("tile: [16, 16, 1]", "tile: [16, 16]"),
            "r.yaml:11: graph[3].mmt4d.tile: expected the inner tile [M0, N0, K0], got 2 sizes",
        ),
        (
            ("tile: [16, 16, 1]", "tile: [16, 0, 1]"),
            "r.yaml:11: graph[3].mmt4d.tile: inner tile sizes must be >= 1",
        ),
        (
            ("ops: {op: linalg.generic}", "ops: {kind: contraction}"),
            "r.yaml:8: graph[0].fuse_elementwise_ext.ops.kind: unknown field 'kind'",
        ),
        (
            ("[--iree-opt-data-tiling]", "[iree-opt-data-tiling]"),
            "r.yaml:4: baseline.flags[0]: expected an iree-compile flag starting with '--'",
        ),
        (
            ("[--iree-llvmcpu-enable-ukernels=none]", "[ukernels]"),
            "r.yaml:5: compile_flags[0]: expected an iree-compile flag starting with '--'",
        ),
        (
            ("metrics: [bandwidth]", "metrics: [gflops]"),
            "r.yaml:6: metrics[0]: got 'gflops'; allowed: bandwidth",
        ),
    ],
)
def test_bad_graph_rewrite_options_name_file_line_and_field(
    edit: tuple[str, str], expected: str
) -> None:
    assert expected in _error(GRAPH.replace(*edit))


def test_graph_rewrite_in_a_kernel_schedule_is_refused() -> None:
    text = """\
    name: k
    workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
    kernels:
      - name: mm
        match: {op: linalg.matmul}
        schedule:
          - fuse_pad: {}
    """
    assert (
        "r.yaml:7: kernels[0].schedule[0].fuse_pad: this step rewrites the whole module"
        in _error(text)
    )


def test_unknown_metric_from_python_is_an_error() -> None:
    r = RecipeBuilder("m", workload=generator("matmul", M=8, N=8, K=8)).metrics("flops")
    with pytest.raises(RecipeError, match="unknown metric 'flops'; available: bandwidth"):
        plan(r.build())


def test_generalize_then_specialize_round_trips_and_reports_op_counts(target: str) -> None:
    r = RecipeBuilder("s", workload=generator("matmul", M=32, N=32, K=32), targets=[target])
    r.graph.match("linalg.matmul", name="mm").generalize()
    r.graph.fuse_pad()  # a rewrite stage between the two scripts: each reports separately
    r.graph.match("linalg.generic", name="g").specialize()
    result = apply_graph(plan(r.build()))
    assert "linalg.matmul" in result.module and "linalg.generic" not in result.module
    generalized, pads, specialized = result.reports
    assert generalized.startswith("graph steps match, generalize (test_graph_recipes.py:")
    assert generalized.endswith("linalg.generic 0→1, linalg.matmul 1→0")
    assert pads.startswith("fuse_pad: changed nothing")
    assert specialized.endswith("linalg.generic 1→0, linalg.matmul 0→1")
    assert run(plan(r.build()), time_it=False).status == "ok"


def test_kernel_schedule_for_a_target_the_recipe_lacks_is_an_error() -> None:
    text = """\
    name: k
    workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
    kernels:
      - name: mm
        targets: [vulkan]
        match: {op: linalg.matmul}
        config: {tile_sizes: {workgroup: [8, 8, 0]}}
    """
    assert "r.yaml:4: kernels[0].targets: vulkan is not among the recipe's targets (x86)" in _error(
        text
    )


SMALL = {
    "elementwise_chain_x86": {"M": 128, "N": 96},
    # register tiles that divide the small image (the defaults' 7-pixel rows do not, and
    # where no entry fits IREE's pipeline would run instead of the graph schedule)
    "pad_fusion_x86": {"H": 10, "W": 12, "C": 16, "M": 8, "WH": 5, "RW": 6, "RF": 8}
    | {"WH1": 5, "RW1": 6, "RF1": 8},
    "collapse_dims_x86": {"N": 2, "C": 8, "H": 10, "W": 12},
    "matmul_mmt4d_x86": {"M": 64, "N": 48, "K": 40},
}
SHAPE = {
    # what the graph schedule must have done, read in the module IREE compiles
    "elementwise_chain_x86": lambda ir: (
        ir.count("linalg.generic") == 1 and "linalg.elementwise" not in ir
    ),
    "pad_fusion_x86": lambda ir: "tensor.pad" not in ir and "tensor.insert_slice" in ir,
    "collapse_dims_x86": lambda ir: "tensor<2x8x120xf32>" in ir,
    "matmul_mmt4d_x86": lambda ir: "linalg.mmt4d" in ir and "linalg.matmul" not in ir,
}


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.usefixtures("iree")
def test_graph_rewrite_recipes_on_x86(name: str, tmp_path: Path) -> None:
    p = plan(load(name), "x86", SMALL[name])
    files = build(p, tmp_path)
    assert SHAPE[name](files.input_file.read_text())
    # one report of the graph rewrite (the fuse_ext kernels, as pad_fusion_x86's, add theirs)
    (graph,) = [r for r in files.reports if not r.startswith("kernel '")]
    assert "changed nothing" not in graph
    report = run(p, time_it=False)
    assert report.status == "ok", report


@pytest.mark.parametrize("name", sorted(SMALL))
def test_graph_rewrite_recipes_on_vulkan(name: str, tmp_path: Path, vulkan: None) -> None:
    p = plan(load(name), "vulkan", SMALL[name])
    module = build(p, tmp_path).input_file.read_text()
    assert SHAPE[name](module)
    if name == "matmul_mmt4d_x86":  # packs are lowered on Vulkan, which cannot compile them
        assert "linalg.pack" not in module and "linalg.unpack" not in module
    report = run(p, time_it=False)
    assert report.status == "ok", report


@pytest.mark.usefixtures("iree")
def test_bandwidth_metric_reports_gbps_against_a_probe_with_the_same_traffic() -> None:
    p = plan(load("elementwise_chain_x86"), "x86", {"M": 256, "N": 256})
    report = run(p, repeats=1)
    assert report.status == "ok", report
    bw = report.bandwidth
    # x read once (plus the two broadcast vectors), two results written
    assert bw.traffic_bytes == 4 * (256 * 256 + 256 + 256) + 2 * 4 * 256 * 256
    assert bw.probe == "bandwidth_probe_1r2w_65536"
    assert bw.scheduled_gbps > 0 and bw.probe_gbps > 0
    assert bw.fraction_of_probe == pytest.approx(bw.scheduled_gbps / bw.probe_gbps)


@pytest.mark.usefixtures("iree")
def test_baseline_and_compile_flags_reach_their_builds(tmp_path: Path) -> None:
    r = RecipeBuilder("b", workload=generator("matmul", M=64, N=64, K=64))
    r.baseline(flags=["--iree-opt-data-tiling"]).compile_flags(
        "--iree-llvmcpu-enable-ukernels=none"
    )
    p = plan(r.build())
    baseline_command = compile_baseline(p, tmp_path).command
    assert "--iree-opt-data-tiling" in baseline_command
    assert "--iree-llvmcpu-enable-ukernels=none" not in baseline_command
    report = run(p, repeats=1)
    assert report.status == "ok", report
    assert report.baseline == "iree-default --iree-opt-data-tiling"
    assert "--iree-llvmcpu-enable-ukernels=none" in report.compile_command
    assert "--iree-opt-data-tiling" not in report.compile_command
