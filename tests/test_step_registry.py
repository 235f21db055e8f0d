"""The step registry: one definition per primitive drives both front ends, validation on
the model (whichever front end made the step), emission and the docs' option tables."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.emit import EMITTED_STEPS, emit
from tdsched.schedules.dsl.options import Kind, step_options
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.dsl.recipe import KernelSchedule
from tdsched.schedules.dsl.step_docs import INDEX, index_page, options_table
from tdsched.schedules.dsl.steps import STEPS, StepBase, register
from tdsched.schedules.frontends.python_api import Match, P, RecipeBuilder, generator
from tdsched.schedules.frontends.yaml_frontend import parse_recipe

DOCS = Path(__file__).resolve().parent.parent / "docs" / "primitives"
HERE = Path(__file__).name


def _builder() -> RecipeBuilder:
    return RecipeBuilder("r", workload=generator("matmul", M=64, N=64, K=64))


def _line_of(marker: str) -> int:
    return next(
        i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if marker in line
    )


def test_python_mmt4d_with_two_sizes_names_the_line_and_field() -> None:
    r = _builder()
    with pytest.raises(RecipeError) as err:
        r.graph.mmt4d([4, 4])  # marker: mmt4d-two-sizes
    message = str(err.value)
    assert f"{HERE}:{_line_of('marker: mmt4d-two-sizes')}: mmt4d.tile:" in message
    assert "expected the inner tile [M0, N0, K0], got 2 sizes" in message


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            lambda k: k.root.tile([8, "x", 0]),
            r'tile.sizes: expected an integer or a "\$\{PARAM\}"',
        ),
        (lambda k: k.root.tile([8, 8, 0], loop="fo"), "tile.loop: got 'fo'; allowed: for, forall"),
        (lambda k: k.root.tile(8), "tile.sizes: expected a list of integers, got 8"),  # type: ignore[arg-type]
        (lambda k: k.cleanup(licm="yes"), "cleanup.licm: expected true or false, got 'yes'"),  # type: ignore[arg-type]
        (lambda k: k.root.producer("x"), "producer.operand: expected an integer"),
        (
            lambda k: k.step("fuse_into", producer=3, loop="l"),
            "fuse_into.producer: expected a handle",
        ),
        (lambda k: k.step("tilee"), "unknown primitive 'tilee'; available: match, producer, tile"),
        (lambda k: k.step("tile", sizez=[1]), "unexpected keyword argument 'sizez'"),
    ],
)
def test_python_steps_are_checked_where_written(build: object, expected: str) -> None:
    k = _builder().kernel("mm", match=Match(kind="contraction"))
    with pytest.raises((RecipeError, TypeError), match=expected) as err:
        build(k)  # type: ignore[operator]
    if err.type is RecipeError:
        assert str(err.value).startswith(f"{__file__}:")


def test_parameters_are_checked_again_when_substituted() -> None:
    r = _builder().parameters(TILE=4, OPS=1)
    r.graph.mmt4d([P("TILE"), P("TILE"), 1])
    r.graph.fuse_elementwise_ext(max_operands=P("OPS"))
    recipe = r.build()
    with pytest.raises(RecipeError, match="max_operands: a fused op has at least 2 operands"):
        resolve(recipe)
    with pytest.raises(RecipeError, match=r"tile: inner tile sizes must be >= 1, got \[0, 0, 1\]"):
        resolve(recipe, {"TILE": 0, "OPS": 4})
    with pytest.raises(RecipeError, match=r"tile: expected an integer .*got 'abc'"):
        resolve(recipe, {"TILE": "abc", "OPS": 4})


def test_scope_rules_hold_for_both_front_ends() -> None:
    r = _builder()
    r.graph.match("linalg.matmul").tile([8, 8, 8])
    with pytest.raises(RecipeError, match="host-level loops, which IREE cannot compile"):
        r.build()
    r = _builder()
    r.kernel("mm", match=Match(kind="contraction")).fuse_pad()
    with pytest.raises(RecipeError, match=r"rewrites the whole module .*put it under 'graph'"):
        r.build()
    text = """\
name: r
workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
kernels:
  - name: mm
    match: {kind: contraction}
    schedule:
      - mmt4d: {tile: [8, 8, 1]}
"""
    with pytest.raises(RecipeError, match=r"r.yaml:7: kernels\[0\].schedule\[0\].mmt4d: .*'graph'"):
        parse_recipe(text, "r.yaml")


ALL_STEPS = """\
name: every_step
workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
parameters: {T: 8}
graph:
  - match: {op: linalg.matmul, as: mm}
  - generalize: {target: mm}
  - specialize: {target: mm}
  - decompose: {target: mm}
  - fuse_elementwise_ext: {shared_input: false, max_operands: 4, ops: {op: linalg.generic}}
  - collapse_dims: {reassociation: auto}
  - collapse_dims: {reassociation: [[0], [1, 2]]}
  - mmt4d: {tile: [8, 8, 1], lower_packs: true}
  - fuse_pad: {ops: {op: tensor.pad}}
  - conv1x1_to_matmul: {ops: {layer: [proj]}}
  - im2col: {ops: {layer: [stem]}}
  - decompose_softmax: {ops: {layer: [attn]}}
  - channels_last: {ops: {layer: [stem]}}
  - hoist_pad: {ops: {op: tensor.pad, attributes: [halo]}}
  - dispatch_region: {root: {op: linalg.matmul}, stop: {op: linalg.fill}}
  - fuse_ext: {root: {op: linalg.matmul}, tile_sizes: [8, 8, 0], intermediates: recompute, loop: for}
  - tile_ext: {root: {op: linalg.matmul}, tile_nums: [2, 2, 2], interchange: [2, 0, 1]}
  - fuse_operands: {tile_sizes: [8], stop: {op: linalg.fill}, intermediates: recompute, loop: for}
kernels:
  - name: mm
    match: {kind: contraction}
    schedule:
      - match: {op: linalg.fill, as: fill}
      - producer: {of: root, operand: 2, as: init}
      - tile: {sizes: ["${T}", 8, 0], loop: forall, mapping: workgroup, loops: wg}
      - fuse_into: {producer: fill, loop: wg}
      - tile: {sizes: [0, 0, 8], interchange: [0, 1, 2], loops: k}
      - interchange: {permutation: [0, 1, 2]}
      - cleanup: {licm: false, unit_dims: true}
      - vectorize: {target: root, sizes: [8, 8, 8]}
      - vectorize: {}
"""


def test_every_primitive_reads_the_same_from_yaml_and_python() -> None:
    r = RecipeBuilder("every_step", workload=generator("matmul", M=64, N=64, K=64))
    r.parameters(T=8)
    g = r.graph
    mm = g.match("linalg.matmul", name="mm")
    mm.generalize().specialize().decompose()
    g.fuse_elementwise_ext(shared_input=False, max_operands=4, ops=Match("linalg.generic"))
    g.collapse_dims("auto")
    g.collapse_dims([[0], [1, 2]])
    g.mmt4d([8, 8, 1], lower_packs=True)
    g.step("fuse_pad", ops=Match("tensor.pad"))
    g.conv1x1_to_matmul(ops=Match(layer=["proj"]))
    g.im2col(ops=Match(layer=["stem"]))
    g.decompose_softmax(ops=Match(layer=["attn"]))
    g.channels_last(ops=Match(layer=["stem"]))
    g.hoist_pad(ops=Match("tensor.pad", attributes=["halo"]))
    g.dispatch_region(Match("linalg.matmul"), stop=Match("linalg.fill"))
    g.fuse_ext(Match("linalg.matmul"), [8, 8, 0], intermediates="recompute", loop="for")
    g.tile_ext(Match("linalg.matmul"), tile_nums=[2, 2, 2], interchange=[2, 0, 1])
    g.fuse_operands([8], stop=Match("linalg.fill"), intermediates="recompute", loop="for")
    k = r.kernel("mm", match=Match(kind="contraction"))
    fill = k.match("linalg.fill", name="fill")
    k.root.producer(2, name="init")
    wg = k.root.tile([P("T"), 8, 0], loop="forall", mapping="workgroup", loops="wg")
    fill.fuse_into(wg)
    k.root.tile([0, 0, 8], interchange=[0, 1, 2], loops="k")
    k.root.interchange([0, 1, 2])
    k.cleanup(licm=False, unit_dims=True)
    k.root.vectorize([8, 8, 8])
    k.vectorize()
    python, from_yaml = r.build(), parse_recipe(ALL_STEPS, "r.yaml")

    def fields(steps: tuple[StepBase, ...]) -> list[tuple[str, dict[str, object]]]:
        return [
            (
                s.primitive,
                {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name != "where"},
            )
            for s in steps
        ]

    assert fields(python.graph) == fields(from_yaml.graph)
    assert fields(python.kernels[0].steps) == fields(from_yaml.kernels[0].steps)
    used = {s.primitive for s in (*from_yaml.graph, *from_yaml.kernels[0].steps)}
    assert used == set(STEPS), "add the new primitive to ALL_STEPS and to this test"


def test_every_registered_step_has_an_emitter() -> None:
    assert {info.cls for info in STEPS.values()} <= EMITTED_STEPS


def test_a_step_without_an_emitter_fails_loudly() -> None:
    @register("probe_only")
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class ProbeOnlyStep(StepBase):
        """A step nobody emits (registered only for this test)."""

    try:
        r = _builder()
        r.kernel("mm", match=Match(kind="contraction")).step("probe_only")
        recipe = r.build()
        with pytest.raises(RecipeError, match="probe_only step has no transform-script emitter"):
            emit(recipe, "x86", {"linalg.matmul": {3}})
    finally:
        del STEPS["probe_only"]


def test_kernel_schedule_steps_keep_their_type() -> None:
    r = _builder()
    r.kernel("mm", match=Match(kind="contraction")).cleanup()
    (kernel,) = r.build().kernels
    assert isinstance(kernel, KernelSchedule) and kernel.steps[0].primitive == "cleanup"


@pytest.mark.parametrize("primitive", sorted(STEPS))
def test_each_primitive_has_a_doc_page_with_its_current_options(primitive: str) -> None:
    page = DOCS / f"{primitive}.md"
    assert page.is_file(), f"docs/primitives/{primitive}.md is missing"
    text = page.read_text()
    table = options_table(STEPS[primitive].cls)
    assert table in text, (
        f"the options table in {page.name} is out of date: run "
        f"`{sys.executable} -m tdsched.schedules.dsl.step_docs docs/primitives`"
    )


def test_the_primitives_index_lists_every_registered_primitive() -> None:
    index = DOCS / INDEX
    assert index.is_file() and index.read_text() == index_page(), (
        f"docs/primitives/{INDEX} is out of date: run "
        f"`{sys.executable} -m tdsched.schedules.dsl.step_docs docs/primitives`"
    )
    for primitive in STEPS:
        assert f"[{primitive}]({primitive}.md)" in index_page()


def test_options_tables_list_every_option_with_its_default() -> None:
    table = options_table(STEPS["tile"].cls)
    assert re.search(r"\| `sizes` \| list of integers \| required \|", table)
    assert "| `loop` | `for` or `forall` | `for` |" in table
    match_table = options_table(STEPS["match"].cls)
    assert "`as`" in match_table and "op, kind, shape" in match_table
    for info in STEPS.values():
        for opt in step_options(info.cls):
            if opt.spec.kind is Kind.CHOICE:
                assert opt.default in opt.spec.choices
