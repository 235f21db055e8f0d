"""``tdsched tune``: standalone task workloads, schedule templates, budget sharing, and a
real tune of the shipped small CNN checked against its numpy reference."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from tdsched.schedules.base.errors import RecipeError, Where
from tdsched.schedules.cli.main import main
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.dsl.params import substitute_plain
from tdsched.schedules.dsl.steps import Step
from tdsched.schedules.frontends.step_documents import step_document
from tdsched.schedules.measure.run_report import RunReport
from tdsched.schedules.measure.status import Status
from tdsched.schedules.sweep.database import Result, ResultsDB
from tdsched.schedules.tune.model_recipe import ModelSpec, write_model_recipe
from tdsched.schedules.tune.outcome import TuneOutcome
from tdsched.schedules.tune.plot import plot_tune
from tdsched.schedules.tune.prepare import prepare
from tdsched.schedules.tune.races import (
    GRAPH_RACE_FILE,
    LAYOUT_RACE_FILE,
    LayoutRace,
    earlier_race,
    prune_conv_rewrites,
    race_layouts,
    race_model_rewrites,
    schedules_digest,
)
from tdsched.schedules.tune.scheduler import _next, _round
from tdsched.schedules.tune.state import (
    StateError,
    TuneState,
    load_state,
    read_state,
    save_state,
)
from tdsched.schedules.tune.task_match import Ambiguous, ModelOps, op_match
from tdsched.schedules.tune.tasks import ModelTasks, OpSignature, Task
from tdsched.schedules.tune.templates import (
    REGISTER_FIT,
    NoTemplate,
    conditions_hold,
    template_for,
)
from tdsched.schedules.tune.tuning import TaskTuning, TuneOptions
from tdsched.targets import make_target
from tdsched.targets.timing import Timing
from tdsched.transform_lib.census import StructuredOp
from tdsched.transform_lib.constant_operands import ModelConstants
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp
from tdsched.transform_lib.errors import ScheduleError
from tdsched.transform_lib.standalone_dispatch import dataflow, standalone_function

MODEL = ModelSpec("m", {"model": "m"}, ())

MATMUL_MODULE = """
func.func @mm(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %m : tensor<4x6xf32>
}
"""

LAYOUT = (
    "#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, ReadOnly>, "
    "#hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer>]>"
)


def _dispatch(bias: str = "1.0", strides: str = "[1, 1]") -> str:
    """A dispatch as a census prints it: a matmul of a strided slice, plus a bias."""
    return f"""
func.func @net_dispatch_0_matmul() {{
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %b = arith.constant {bias} : f32
  %0 = hal.interface.binding.subspan layout({LAYOUT}) binding(0) alignment(64) offset(%c0) flags(ReadOnly) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<16x16xf32>>
  %1 = hal.interface.binding.subspan layout({LAYOUT}) binding(1) alignment(64) offset(%c0) flags(ReadOnly) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x4xf32>>
  %2 = hal.interface.binding.subspan layout({LAYOUT}) binding(2) alignment(64) offset(%c0) : !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x4xf32>>
  %3 = iree_tensor_ext.dispatch.tensor.load %0, offsets = [0, 0], sizes = [8, 8], strides = {strides} : !iree_tensor_ext.dispatch.tensor<readonly:tensor<16x16xf32>> -> tensor<8x8xf32>
  %4 = iree_tensor_ext.dispatch.tensor.load %1, offsets = [0, 0], sizes = [8, 4], strides = [1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x4xf32>> -> tensor<8x4xf32>
  %5 = tensor.empty() : tensor<8x4xf32>
  %6 = linalg.fill ins(%cst : f32) outs(%5 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %7 = linalg.matmul ins(%3, %4 : tensor<8x8xf32>, tensor<8x4xf32>) outs(%6 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %8 = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}} ins(%7 : tensor<8x4xf32>) outs(%5 : tensor<8x4xf32>) {{
  ^bb0(%in: f32, %out: f32):
    %9 = arith.addf %in, %b : f32
    linalg.yield %9 : f32
  }} -> tensor<8x4xf32>
  iree_tensor_ext.dispatch.tensor.store %8, %2, offsets = [0, 0], sizes = [8, 4], strides = [1, 1] : tensor<8x4xf32> -> !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x4xf32>>
  return
}}
"""


def test_a_dispatch_stands_alone_with_its_loads_as_arguments_and_stores_as_results() -> None:
    text = standalone_function(_dispatch(strides="[2, 2]"), "t0")
    assert (
        "func.func @t0(%arg0: tensor<16x16xf32>, %arg1: tensor<8x4xf32>) -> tensor<8x4xf32>" in text
    )
    # The strided read stays strided: IREE would see a denser op otherwise.
    assert "tensor.extract_slice %arg0[0, 0] [8, 8] [2, 2]" in text
    assert "hal.interface" not in text and "iree_tensor_ext" not in text
    assert "return %" in text


def test_a_whole_binding_read_is_the_argument_itself() -> None:
    text = standalone_function(_dispatch().replace("16x16xf32>>", "8x8xf32>>"), "t0")
    assert "%arg0: tensor<8x8xf32>" in text and "extract_slice" not in text


def test_dataflow_ignores_constant_values_and_what_an_epilogue_adds() -> None:
    one = standalone_function(_dispatch(bias="1.0"), "t0")
    assert dataflow(one) == dataflow(standalone_function(_dispatch(bias="2.0"), "t0"))
    # A residual: the epilogue reads one more argument and adds it; fuse_ext plans the same.
    residual = (
        one.replace("%arg1: tensor<8x4xf32>)", "%arg1: tensor<8x4xf32>, %r: tensor<8x4xf32>)")
        .replace("[#map, #map]", "[#map, #map, #map]")
        .replace("ins(%2 : tensor<8x4xf32>)", "ins(%2, %r : tensor<8x4xf32>, tensor<8x4xf32>)")
        .replace("^bb0(%in: f32, %out: f32)", "^bb0(%in: f32, %res: f32, %out: f32)")
        .replace("%4 = arith.addf %in, %cst_0", "%4 = arith.addf %in, %res")
    )
    assert "%r :" in residual and dataflow(residual) == dataflow(one)
    # An epilogue reading another op is another plan.
    elsewhere = one.replace(
        "ins(%2 : tensor<8x4xf32>) outs(%0", "ins(%1 : tensor<8x4xf32>) outs(%0"
    )
    assert elsewhere != one and dataflow(elsewhere) != dataflow(one)


def test_a_buffer_dispatch_cannot_stand_alone() -> None:
    copy = """
func.func @net_dispatch_1_slow_memcpy() {
  %c0 = arith.constant 0 : index
  return
}
"""
    with pytest.raises(ScheduleError, match="works on buffers"):
        standalone_function(copy, "t1")


def _conv() -> ConfiguredDispatch:
    """A 3x3 conv (unit batch, as strategies see it) with a fill and a bias epilogue."""
    out = (1, 16, 16, 16)
    parallel = ("parallel",) * 4
    return ConfiguredDispatch(
        "t4_dispatch_0",
        (
            ConfiguredOp("linalg.fill", out, parallel, (0, 1, 2, 3), {}),
            ConfiguredOp(
                "linalg.generic",
                (1, 16, 16, 16, 16, 3, 3),
                parallel + ("reduction",) * 3,
                (0, 1, 2, 3),
                {
                    "distribution": (0, 2, 16, 16, 0, 0, 0),
                    "vector_common_parallel": (1, 2, 1, 8, 0, 0, 0),
                    "vector_reduction": (0, 0, 0, 0, 8, 1, 1),
                },
            ),
            # the bias epilogue: reads the conv's result dim by dim, and the bias by channel
            ConfiguredOp("linalg.generic", out, parallel, (0, 1, 2, 3), {}, ((0, 1, 2, 3), (3,))),
        ),
        root=1,
        root_reads={2: 0},
        init_is_fill=True,
        root_inputs=2,
    )


def _docs(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """Template steps as the task recipe writes them."""
    return [step_document(step) for step in steps]


def _write_task(path: Path, template: dict[str, Any]) -> None:
    """A task recipe at ``path`` with ``template``'s parameters, graph and kernels."""
    path.write_text(
        yaml.safe_dump({"name": f"task_{path.stem}", "workload": {"file": "t.mlir"}, **template})
    )


TASK = Task("t4", (OpSignature("linalg.generic", (16, 16, 16, 16, 3, 3), "convolution", "f32"),))


def test_register_tiles_fit_the_workgroup_tiles_iree_distributes_by_one() -> None:
    """SqueezeNet's stride-2 im2col gather: IREE distributes its 111-wide rows one by one,
    so the row's workgroup tile is 1 and a register tile of 111 (the only vector width
    that divides 111) met no workgroup tile: every candidate was pruned."""
    out = (3, 3, 3, 111, 111)
    parallel = ("parallel",) * 5
    gather = ConfiguredDispatch(
        "t1_dispatch_0",
        (
            ConfiguredOp(
                "linalg.generic",
                out,
                parallel,
                (0, 1, 2, 3, 4),
                {"distribution": (1, 0, 0, 1, 1), "vector_common_parallel": (1, 1, 1, 1, 4)},
            ),
        ),
        root=0,
        root_reads={},
        init_is_fill=False,
        root_inputs=1,
    )
    task = Task("t1", (OpSignature("linalg.generic", out, "elementwise", "f32"),))
    template = template_for(task, gather)
    assert template.space["W4"] == [1] and template.space["RW"] == [1]
    assert template.space["RH"] == [1]
    assert conditions_hold(template.constraints, {**template.parameters, "ISA": "avx512"})


def test_the_template_is_centred_on_iree_s_tile_sizes() -> None:
    template = template_for(TASK, _conv())
    assert template.parameters == {
        "W1": 2, "W2": 16, "W3": 16, "RW": 8, "RH": 1, "RK": 8, "TK": 16, "EPILOGUE": "buffer"
    }  # fmt: skip
    assert template.space["W1"] == [1, 2, 4, 8]  # a quarter to four times IREE's 2
    assert template.space["RK"] == [1, 2, 4, 8, 16]
    assert template.space["TK"] == [16]  # 16 channels: no cache tile smaller than the loop
    steps = _docs(template.schedule)
    assert steps[0] == {
        "fuse_ext": {"root": {"op": "linalg.generic"}, "tile_sizes": [0, "${W1}", "${W2}", "${W3}"]}
    }
    assert steps[1] == {"producer": {"operand": 0, "as": "main"}}  # of: root, the default
    assert steps[2] == {"producer": {"of": "main", "operand": 2, "as": "init"}}
    # EPILOGUE buffer: the cache tile on the first reduction loop, then the register tile
    # on the two innermost output dims only (a unit loop between two tiled ones gives
    # wrong results after vectorizing), then the reduction; init and epilogue after it.
    buffer = "EPILOGUE == 'buffer'"
    assert steps[3]["tile"] == {
        "target": "main",
        "sizes": [0, 0, 0, 0, "${TK}", 0, 0],
        "when": buffer,
    }
    assert steps[4]["tile"]["sizes"] == [1, 1, "${RH}", "${RW}", 0, 0, 0]
    assert steps[5]["tile"]["sizes"] == [0, 0, 0, 0, "${RK}", 1, 1]
    assert steps[6]["tile"] == {"target": "init", "sizes": [1, 1, "${RH}", "${RW}"], "when": buffer}
    assert steps[7]["tile"] == {"sizes": [1, 1, "${RH}", "${RW}"], "when": buffer}
    # EPILOGUE fused: the epilogue's register tile first, the conv and its init fused
    # into it, then the conv's reduction; no cache tile (TK held at the whole loop).
    fused = "EPILOGUE == 'fused'"
    assert steps[8:12] == [
        {"tile": {"sizes": [1, 1, "${RH}", "${RW}"], "loops": "registers", "when": fused}},
        {"fuse_into": {"producer": "main", "loop": "registers", "when": fused}},
        {"fuse_into": {"producer": "init", "loop": "registers", "when": fused}},
        {"tile": {"target": "main", "sizes": [0, 0, 0, 0, "${RK}", 1, 1], "when": fused}},
    ]
    assert template.space["EPILOGUE"] == ["buffer", "fused"]
    assert "EPILOGUE == 'buffer' or TK == 16" in template.constraints
    assert "TK % RK == 0" in template.constraints
    assert steps[-1] == {"vectorize": {}}
    assert "W3 % RW == 0" in template.constraints


def _nhwc_conv(vector_reduction: tuple[int, ...]) -> ConfiguredDispatch:
    """A 3x3 NHWC/HWCF conv (loops n, oh, ow, f, kh, kw, c: the window before the
    channels) with its fill and no epilogue, IREE's vector reduction tile as given."""
    out = (1, 28, 28, 64)
    parallel = ("parallel",) * 4
    levels = {
        "distribution": (0, 4, 28, 64, 0, 0, 0),
        "vector_common_parallel": (1, 1, 4, 16, 0, 0, 0),
        "vector_reduction": vector_reduction,
    }
    return ConfiguredDispatch(
        "t0_dispatch_0",
        (
            ConfiguredOp("linalg.fill", out, parallel, (0, 1, 2, 3), {}),
            ConfiguredOp(
                "linalg.generic",
                (1, 28, 28, 64, 3, 3, 64),
                parallel + ("reduction",) * 3,
                (0, 1, 2, 3),
                levels,
            ),
        ),
        root=1,
        root_reads={},
        init_is_fill=True,
        root_inputs=2,
    )


@pytest.mark.parametrize("iree_reduction", [(0, 0, 0, 0, 1, 1, 8), (0, 0, 0, 0, 0, 0, 0)])
def test_a_conv_is_reduced_along_its_channels_not_its_window(
    iree_reduction: tuple[int, ...],
) -> None:
    """The cache tile and the register tile's reduction step go on the loop IREE
    vectorizes the reduction along, else the longest: the channels (64), not the window's
    first loop (3, where a 28x28x64 tune found nothing better than 0.49x IREE)."""
    template = template_for(TASK, _nhwc_conv(iree_reduction))
    steps = _docs(template.schedule)
    assert steps[2]["tile"]["sizes"] == [0, 0, 0, 0, 0, 0, "${TK}"]
    assert steps[4]["tile"]["sizes"] == [0, 0, 0, 0, 1, 1, "${RK}"]
    assert template.space["RK"] == [1, 2, 4, 8, 16]
    assert template.space["TK"] == [32, 64]
    assert template.parameters["RK"] == (8 if iree_reduction[-1] else 1)
    # FILL fused: the register tile in a forall, the fill fused into it, then the
    # reduction; no cache tile
    assert template.space["FILL"] == ["apart", "fused"]
    assert "FILL == 'apart' or TK == 64" in template.constraints
    fused = [step for step in steps if "FILL == 'fused'" in str(step)]
    assert fused == [
        {"tile": {"sizes": [1, 1, "${RH}", "${RW}", 0, 0, 0], "loop": "forall",
                  "loops": "registers", "when": "FILL == 'fused'"}},
        {"fuse_into": {"producer": "init", "loop": "registers", "when": "FILL == 'fused'"}},
        {"tile": {"sizes": [0, 0, 0, 0, 1, 1, "${RK}"], "when": "FILL == 'fused'"}},
    ]  # fmt: skip


def test_the_register_tile_takes_any_row_count_that_fits_the_isa_s_registers() -> None:
    """RH: every divisor of its dim up to 16 (7 and 14 output pixels of a 28-wide row),
    kept to the accumulators the ISA's registers hold; IREE's own tile always stays."""
    template = template_for(TASK, _nhwc_conv((0, 0, 0, 0, 1, 1, 8)))
    assert template.space["RH"] == [1, 2, 4, 7, 14]
    fit = template.constraints[-1]

    def holds(rh: int, rw: int, isa: str) -> bool:
        return conditions_hold([fit], {"RH": rh, "RW": rw, "ISA": isa})

    assert holds(14, 32, "avx512") and not holds(14, 64, "avx512")  # 28 of 32 zmm
    assert holds(6, 16, "avx2") and not holds(7, 16, "avx2")  # 12 of 16 ymm
    assert holds(4, 16, "avx2")  # IREE's own 4x16, which fits anyway
    assert not holds(14, 32, "avx2")


def _depthwise(filter_loops: tuple[int, ...]) -> ConfiguredDispatch:
    """A 3x3 depthwise conv (loops n, oh, ow, c, kh, kw) with its fill; its filter read
    through ``filter_loops`` (NHWC/HWC: kh, kw, c)."""
    out = (1, 56, 56, 96)
    parallel = ("parallel",) * 4
    levels = {
        "distribution": (0, 4, 56, 32, 0, 0),
        "vector_common_parallel": (1, 1, 8, 16, 0, 0),
        "vector_reduction": (0, 0, 0, 0, 1, 3),
    }
    conv = ConfiguredOp(
        "linalg.generic", (1, 56, 56, 96, 3, 3), parallel + ("reduction",) * 2, (0, 1, 2, 3),
        levels, (None, filter_loops),
    )  # fmt: skip
    fill = ConfiguredOp("linalg.fill", out, parallel, (0, 1, 2, 3), {})
    return ConfiguredDispatch("t0_d", (fill, conv), 1, {}, init_is_fill=True, root_inputs=2)


DEPTHWISE = Task("t0", (OpSignature("linalg.generic", (56, 56, 96, 3, 3), "convolution", "f32"),))


def test_a_window_op_may_reduce_row_by_row_in_its_1d_form() -> None:
    """A depthwise conv's only reductions are its window: WINDOW rows tiles the window's
    rows by 1, names the op and decomposes it (the convolution vectorizer then reuses
    each input row across the window's columns); WINDOW loops steps by RK as before."""
    template = template_for(DEPTHWISE, _depthwise((4, 5, 3)))
    assert template.space["WINDOW"] == ["loops", "rows"]
    assert template.parameters["WINDOW"] == "loops"
    steps = _docs(template.schedule)
    # IREE vectorizes the window's columns (its vector reduction tile 3): RK steps them
    # (once per FILL way: the fill apart, or fused into the register tile)
    loops = [step for step in steps if "WINDOW == 'loops'" in str(step)]
    assert [step["tile"]["sizes"] for step in loops] == [[0, 0, 0, 0, 1, "${RK}"]] * 2
    rows = [step for step in steps if "WINDOW == 'rows'" in str(step)]
    assert [next(iter(step)) for step in rows] == ["tile", "specialize", "decompose"] * 2
    assert rows[0]["tile"]["sizes"] == [0, 0, 0, 0, 1, 0]
    assert rows[0]["tile"]["when"] == "FILL == 'apart' and WINDOW == 'rows'"
    # the register tile's rows are the output's columns (RW on the channels the filter
    # reads), so the output row stays 1 for any RH; the unused RK and TK are held
    assert template.space["RK"] == [1, 3] and template.parameters["RK"] == 3  # IREE's 3
    held = "WINDOW == 'loops' or (RK == 3 and TK == 3)"
    assert held in template.constraints
    # NCHW-like: the filter does not read RW's loop, so RH is the output's rows: one
    nchw = template_for(DEPTHWISE, _depthwise((4, 5)))
    assert "WINDOW == 'loops' or (RK == 3 and TK == 3 and RH == 1)" in nchw.constraints
    # a convolution with channels to reduce has no such way
    assert "WINDOW" not in template_for(TASK, _nhwc_conv((0, 0, 0, 0, 1, 1, 8))).space


def test_without_an_epilogue_the_root_is_named_where_its_op_is_unique() -> None:
    """IREE may re-create the matched op before the strategy runs (a conv whose fill
    follows it, in small_cnn), so fuse_ext names the root instead of taking "the dispatch
    root"; with a second op of the same name that name would match both, so not then."""
    conv = _conv()
    alone = dataclasses.replace(conv, ops=conv.ops[:2], root_reads={})
    steps = _docs(template_for(TASK, alone).schedule)
    assert steps[0]["fuse_ext"]["root"] == {"op": "linalg.generic"}
    assert steps[1] == {"producer": {"operand": 2, "as": "init"}}
    padded = dataclasses.replace(alone, ops=(conv.ops[2], *alone.ops), root=2)
    assert "root" not in _docs(template_for(TASK, padded).schedule)[0]["fuse_ext"]


def _gather() -> ConfiguredDispatch:
    """An im2col gather (channels x 3 x 3 x rows x pixels), one op without a reduction."""
    op = ConfiguredOp(
        "linalg.generic",
        (16, 3, 3, 8, 8),
        ("parallel",) * 5,
        (0, 1, 2, 3, 4),
        {"distribution": (8, 3, 3, 8, 8), "vector_common_parallel": (1, 1, 1, 1, 8)},
    )
    return ConfiguredDispatch("t5", (op,), 0, {}, init_is_fill=False, root_inputs=1)


def test_an_elementwise_task_of_one_op_gets_the_elementwise_template() -> None:
    template = template_for(TASK, _gather())
    # five non-unit dims, at most three workgroup dims: the one IREE splits (channels,
    # 8 of 16) and then the outermost (the window's two); rows and pixels stay whole
    assert template.parameters == {"W0": 8, "W1": 3, "W2": 3, "RW": 8, "RH": 1}
    assert template.space["W0"] == [2, 4, 8, 16]  # a quarter to four times IREE's 8
    assert template.space["RW"] == [4, 8] and template.space["RH"] == [1, 2, 4, 8]
    assert "TK" not in template.space and "RK" not in template.space
    assert _docs(template.schedule) == [
        {
            "fuse_ext": {
                "root": {"op": "linalg.generic"},
                "tile_sizes": ["${W0}", "${W1}", "${W2}", 0, 0],
            }
        },
        {"tile": {"sizes": [1, 1, 1, "${RH}", "${RW}"]}},
        {"cleanup": {"unit_dims": True}},
        {"vectorize": {}},
    ]
    assert template.constraints == [f"(RH == 1 and RW == 8) or {REGISTER_FIT}"]
    # IREE splitting rows and pixels instead: those are distributed
    gather = _gather()
    op = dataclasses.replace(gather.ops[0], levels={"distribution": (16, 3, 3, 4, 4)})
    rows = template_for(TASK, dataclasses.replace(gather, ops=(op,)))
    assert _docs(rows.schedule)[0]["fuse_ext"]["tile_sizes"] == ["${W0}", 0, 0, "${W3}", "${W4}"]
    assert rows.constraints[:2] == ["W3 % RH == 0", "W4 % RW == 0"]


def test_an_elementwise_task_of_several_ops_has_no_template() -> None:
    gather = _gather()
    two = dataclasses.replace(gather, ops=(gather.ops[0], gather.ops[0]), root=1)
    with pytest.raises(NoTemplate, match="2 ops in the dispatch; the elementwise template"):
        template_for(TASK, two)


def _matmul() -> ConfiguredDispatch:
    """A 128x256x64 matmul with a fill and a bias epilogue."""
    out, parallel = (128, 256), ("parallel", "parallel")
    return ConfiguredDispatch(
        "t0_dispatch_0",
        (
            ConfiguredOp("linalg.fill", out, parallel, (0, 1), {}),
            ConfiguredOp(
                "linalg.matmul",
                (128, 256, 64),
                ("parallel", "parallel", "reduction"),
                (0, 1),
                {"distribution": (64, 64, 0), "vector_common_parallel": (8, 32, 0)},
            ),
            ConfiguredOp("linalg.generic", out, parallel, (0, 1), {}, ((0, 1), (1,))),
        ),
        root=1,
        root_reads={2: 0},
        init_is_fill=True,
        root_inputs=2,
    )


MATMUL = OpSignature("linalg.matmul", (128, 256, 64), "contraction", "f32")


def _with_epilogue(dispatch: ConfiguredDispatch, **changes: object) -> ConfiguredDispatch:
    epilogue = dataclasses.replace(dispatch.ops[2], **changes)  # type: ignore[arg-type]
    return dataclasses.replace(dispatch, ops=(*dispatch.ops[:2], epilogue))


def test_an_epilogue_that_writes_its_result_transposed_takes_the_template() -> None:
    """An attention key projection: bias added, the result written transposed. The
    epilogue still iterates over the matmul's output, dim by dim: tiling it tiles that."""
    task = Task("t2", (MATMUL,))
    transposed = _with_epilogue(_matmul(), output_loops=(1, 0))
    template = template_for(task, transposed)
    plain = template_for(task, _matmul())
    assert template.schedule == plain.schedule
    assert template.space["EPILOGUE"] == ["buffer", "fused"]
    # a unit register dim written through the permutation vectorizes wrong: kept out
    assert "RH > 1" in template.constraints and "RH > 1" not in plain.constraints


def test_a_transposed_write_that_puts_a_unit_dim_between_tiled_ones_has_no_template() -> None:
    """Attention's context: a batch matmul (head, token, feature) written token-major.
    Its register tile [1, RH, RW] lands as [RH, 1, RW]: IREE folds the unit dim and
    drops the write's permutation, so no template (measured wrong in a BERT model)."""
    out, parallel = (12, 64, 32), ("parallel",) * 3
    context = ConfiguredDispatch(
        "t5_dispatch_0",
        (
            ConfiguredOp("linalg.fill", out, parallel, (0, 1, 2), {}),
            ConfiguredOp(
                "linalg.batch_matmul",
                (12, 64, 32, 64),
                (*parallel, "reduction"),
                (0, 1, 2),
                {"distribution": (1, 32, 32, 0), "vector_common_parallel": (1, 8, 32, 0)},
            ),
            ConfiguredOp("linalg.generic", out, parallel, (1, 0, 2), {}, ((0, 1, 2),)),
        ),
        root=1,
        root_reads={2: 0},
        init_is_fill=True,
        root_inputs=2,
    )
    task = Task("t5", (OpSignature("linalg.batch_matmul", (12, 64, 32, 64), "contraction", "f32"),))
    with pytest.raises(NoTemplate, match="unit dim between tiled ones"):
        template_for(task, context)
    # written head-major but feature-first: the unit head dim still leads
    leading = _with_epilogue(context, output_loops=(0, 2, 1))
    assert "RH > 1" in template_for(task, leading).constraints


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"input_loops": ((1, 0), (1,))}, "reads the matmul's result transposed"),
        ({"output_loops": None}, "writes through a map that is not a permutation of loops"),
        ({"input_loops": ()}, "does not read the matmul's result"),
        ({"iterators": ("parallel", "reduction")}, "reduces"),
    ],
)
def test_an_epilogue_that_does_not_follow_the_root_s_output_has_no_template(
    changes: dict[str, object], why: str
) -> None:
    with pytest.raises(NoTemplate, match="does not iterate over the root's output"):
        template_for(Task("t2", (MATMUL,)), _with_epilogue(_matmul(), **changes))


def _chained(second: ConfiguredOp | None = None) -> ConfiguredDispatch:
    """:func:`_matmul` with a second epilogue op after the first (an activation after
    the bias add), reading the first's result through operand 0."""
    matmul = _matmul()
    out, parallel = (128, 256), ("parallel", "parallel")
    relu = ConfiguredOp("linalg.generic", out, parallel, (0, 1), {}, ((0, 1),))
    return dataclasses.replace(
        matmul, ops=(*matmul.ops, second or relu), reads_previous={2: 0, 3: 0}
    )


def test_a_chain_of_epilogue_ops_takes_the_template() -> None:
    template = template_for(Task("t2", (MATMUL,)), _chained())
    documents = [step_document(step) for step in template.schedule]
    handles = [d["producer"] for d in documents if "producer" in d]
    assert handles == [
        {"operand": 0, "as": "epilogue1"},
        {"of": "epilogue1", "operand": 0, "as": "main"},
        {"of": "main", "operand": 2, "as": "init"},
    ]
    fused = [
        (d["fuse_into"]["producer"], d["fuse_into"]["when"]) for d in documents if "fuse_into" in d
    ]
    assert fused == [
        ("epilogue1", "EPILOGUE == 'buffer'"),
        ("epilogue1", "EPILOGUE == 'fused'"),
        ("main", "EPILOGUE == 'fused'"),
        ("init", "EPILOGUE == 'fused'"),
    ]


def test_a_chain_op_that_does_not_follow_the_op_before_it_has_no_template() -> None:
    out = (128, 256)
    transposed = ConfiguredOp("linalg.generic", out, ("parallel",) * 2, (0, 1), {}, ((1, 0),))
    with pytest.raises(NoTemplate, match="does not iterate over the op before it's output"):
        template_for(Task("t2", (MATMUL,)), _chained(transposed))
    # the first op may write its result permuted when it is alone, not in a chain
    chain = _chained()
    permuted = dataclasses.replace(chain.ops[2], output_loops=(1, 0))
    with pytest.raises(NoTemplate, match="permuted in a chain of 2 ops"):
        template_for(
            Task("t2", (MATMUL,)),
            dataclasses.replace(chain, ops=(*chain.ops[:2], permuted, chain.ops[3])),
        )


def test_a_matmul_task_from_named_layers_may_also_run_packed() -> None:
    task = Task("t0", (MATMUL,), dispatches=["d0"], layers=["ffn.up"])
    template = template_for(task, _matmul())
    assert template.space["LAYOUT"] == ["rowmajor", "packed"]
    assert template.parameters["LAYOUT"] == "rowmajor"
    assert template.space["M0"] == [6, 8, 16] and template.space["N0"] == [8, 16, 32]
    assert template.space["UNPACK"] == ["separate", "fused"]
    tile = ["${M0}", "${N0}", "${K0}"]
    assert template.graph_document() == [
        {"mmt4d": {"tile": tile, "when": "LAYOUT == 'packed' and UNPACK == 'separate'"}},
        {
            "mmt4d": {
                "tile": tile,
                "fuse_unpack": True,
                "when": "LAYOUT == 'packed' and UNPACK == 'fused'",
            }
        },
    ]
    assert template.kernel_when == "LAYOUT == 'rowmajor'"
    assert template.compile_flags == ["--iree-llvmcpu-enable-ukernels=none"]
    # Each layout holds the other's parameters at one value: every candidate once.
    held = template.constraints[-4]
    assert held.startswith("LAYOUT == 'rowmajor' or (W0 == 64 and W1 == 64 and RW == 32")
    assert held.endswith("and EPILOGUE == 'buffer')")
    assert template.constraints[-3] == (
        "LAYOUT == 'packed' or (M0 == 16 and N0 == 32 and UNPACK == 'separate')"
    )
    # the packed tiles that fit the build's registers (the constraint reads its ISA)
    assert "ISA == 'avx2' and 64 <= M0 * N0 <= 96" in template.constraints[-2]
    assert template.constraints[-1].endswith(REGISTER_FIT)  # the register tile's, last
    # Without layer names the model recipe could not select its matmuls: kernel only.
    unnamed = template_for(Task("t0", (MATMUL,), dispatches=["d0"]), _matmul())
    assert "LAYOUT" not in unnamed.space and unnamed.graph == []
    assert unnamed.kernel_when is None and unnamed.compile_flags == []
    # ... unless the matmul is the model's only one: then its name selects it alone.
    sole = template_for(Task("t0", (MATMUL,), dispatches=["d0"]), _matmul(), sole=True)
    assert sole.space["LAYOUT"] == ["rowmajor", "packed"] and len(sole.graph) == 2


def test_a_model_counts_its_ops_by_name_across_dispatches() -> None:
    matmul = StructuredOp("d0", "linalg.matmul", None, (8, 8, 8), "contraction", "f32")
    fill = StructuredOp("d0", "linalg.fill", None, (8, 8), "elementwise", "f32")
    other = StructuredOp("d1", "linalg.matmul", None, (4, 4, 4), "contraction", "f32")
    tasks = [Task("t0", (), dispatches=["d0"]), Task("t1", (), dispatches=["d1"])]
    assert ModelOps.of([matmul, fill], tasks).count("linalg.matmul") == 1
    assert ModelOps.of([matmul, fill, other], tasks).count("linalg.matmul") == 2


def _tuning(name: str, time_ms: float, **state: object) -> TaskTuning:
    task = Task(name, (OpSignature("linalg.matmul", (8, 8, 8), "contraction", "f32"),))
    task.time_ms = time_ms
    tuning = TaskTuning(task, recipe=Path(f"{name}.yaml"), valid=100)
    for key, value in state.items():
        setattr(tuning, key, value)
    return tuning


def test_a_template_with_no_candidate_keeps_iree_s_pipeline_and_the_tune_goes_on(
    tmp_path: Path,
) -> None:
    """Seen on SqueezeNet: an im2col gather's template held W4 at 1 and RW at 111, so
    ``W4 % RW == 0`` pruned every point and the whole tune stopped with that error."""
    recipe = tmp_path / "t1.yaml"
    recipe.write_text(
        "name: task_t1\nworkload: {generator: matmul, args: {M: 8, N: 8, K: 8}}\n"
        "targets: [x86]\nparameters: {W: 1, RW: 3}\nspace: {W: [1], RW: [3]}\n"
        "constraints: [W % RW == 0]\nkernels: []\n"
    )
    tuning = _tuning("t1", 2.0, recipe=recipe)
    db = ResultsDB(tmp_path / "tune.db")
    try:
        _round(tuning, db, TuneOptions(BuildTarget("x86", threads=1), budget_s=60), None)
    finally:
        db.close()
    assert tuning.exhausted and not tuning.tunable and tuning.best is None
    assert tuning.outcome.startswith("IREE's pipeline: its template has no candidate to sweep (")
    assert "every candidate was pruned" in tuning.outcome


def test_the_budget_goes_first_to_untried_tasks_then_to_the_largest_expected_gain() -> None:
    tried = _tuning("t0", 10.0, candidates=8, rounds=1, last_gain=0.0)
    fresh = _tuning("t1", 1.0)
    assert _next([tried, fresh]) is fresh
    fresh.candidates, fresh.rounds, fresh.last_gain = 8, 1, 0.0
    assert _next([tried, fresh]) is tried  # 10 ms x 5% beats 1 ms x 5%
    tried.rounds = 30  # its floor fell: 10 ms x 5%/30 < 1 ms x 5%
    assert _next([tried, fresh]) is fresh
    fresh.exhausted = True
    assert _next([tried, fresh]) is tried
    tried.exhausted = True
    assert _next([tried, fresh]) is None


def test_a_task_the_budget_never_reached_says_so_rather_than_that_it_lost() -> None:
    never = _tuning("t0", 1.0)
    assert never.outcome.startswith("IREE's pipeline: the budget ran out before its first")
    lost = _tuning("t1", 1.0, candidates=8, rounds=1)
    assert lost.outcome == "IREE's pipeline: no candidate beat IREE's pipeline"


def _census(function: str, *ops: tuple[OpSignature, int, str | None]) -> list[StructuredOp]:
    """A dispatch's census: each op with its input count and the op using its result."""
    return [
        StructuredOp(function, s.op, None, s.loop_ranges, s.kind, s.dtype, inputs, user)
        for s, inputs, user in ops
    ]


STORE = "iree_tensor_ext.dispatch.tensor.store"
CONV = OpSignature("linalg.generic", (16, 16, 16, 16, 3, 3), "convolution", "f32")
FILL = OpSignature("linalg.fill", (16, 16, 16), "elementwise", "f32")


def test_a_task_whose_root_no_match_tells_from_another_tasks_op_is_not_swept(
    tmp_path: Path,
) -> None:
    bare = Task("t0", (CONV,), dispatches=["d0"])
    with_fill = Task("t1", (FILL, CONV), dispatches=["d1"])
    census = _census("d0", (CONV, 2, STORE)) + _census("d1", (FILL, 0, None), (CONV, 2, STORE))
    model = ModelOps.of(census, [bare, with_fill])
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    tuning = prepare(bare, model, {}, ModelConstants(""), tmp_path, options)
    assert tuning.recipe is None and tuning.reason is not None
    assert "linalg.generic 16x16x16x16x3x3 also occur in task t1" in tuning.reason
    assert tuning.outcome.startswith("IREE's pipeline: the op and loop bounds of its")
    assert not list(tmp_path.iterdir())  # nothing written, nothing compiled


def test_a_task_match_adds_the_fewest_discriminators_that_tell_its_root_apart() -> None:
    relu = OpSignature("linalg.generic", (16, 16, 16), "elementwise", "f32")
    stored = Task("t0", (FILL, CONV), dispatches=["d0", "d2"])
    fused = Task("t1", (FILL, CONV, relu), dispatches=["d1"])
    census = (
        _census("d0", (FILL, 0, None), (CONV, 2, STORE))
        + _census("d2", (FILL, 0, None), (CONV, 2, STORE))
        + _census("d1", (FILL, 0, None), (CONV, 2, "linalg.generic"), (relu, 1, STORE))
    )
    model = ModelOps.of(census, [stored, fused])
    base = {"op": "linalg.generic", "shape": [16, 16, 16, 16, 3, 3], "dtype": "f32"}
    # The convs differ only in what uses their result: used_by tells them apart.
    assert op_match(stored, 1, model, by_kind=False) == {**base, "used_by": STORE}
    assert op_match(fused, 1, model, by_kind=False) == {**base, "used_by": "linalg.generic"}
    # The relu and the fills are alone with their name and loop bounds: no discriminator.
    assert op_match(fused, 2, model, by_kind=False) == {
        "op": "linalg.generic",
        "shape": [16, 16, 16],
        "dtype": "f32",
    }
    # Where the dispatches of a task disagree on a discriminator, it cannot be used.
    census[1] = dataclasses.replace(census[1], used_by="linalg.generic")
    with pytest.raises(Ambiguous) as caught:
        op_match(stored, 1, ModelOps.of(census, [stored, fused]), by_kind=False)
    assert caught.value.other == "t1"
    # Both used by a generic: the generic's input count tells a residual add from a ReLU.
    add = OpSignature("linalg.generic", (16, 16, 16), "elementwise", "f32")
    residual = Task("t3", (FILL, CONV, add), dispatches=["d4"])
    census = _census("d1", (FILL, 0, None), (CONV, 2, "linalg.generic"), (relu, 1, STORE))
    census[1] = dataclasses.replace(census[1], used_by_inputs=1)
    census += _census("d4", (FILL, 0, None), (CONV, 2, "linalg.generic"), (add, 2, STORE))
    census[4] = dataclasses.replace(census[4], used_by_inputs=2)
    assert op_match(residual, 1, ModelOps.of(census, [fused, residual]), by_kind=False) == {
        **base,
        "used_by": {"op": "linalg.generic", "inputs": 2},
    }
    # Input counts tell apart ops of the task's own dispatch (a softmax's generics).
    first = OpSignature("linalg.generic", (8, 8), "reduction", "f32")
    last = OpSignature("linalg.generic", (8, 8), "reduction", "f32")
    softmax = Task("t2", (first, last), dispatches=["d3"])
    own = _census("d3", (first, 1, None), (last, 2, STORE))
    assert op_match(softmax, 1, ModelOps.of(own, [softmax]), by_kind=False) == {
        "op": "linalg.generic",
        "shape": [8, 8],
        "dtype": "f32",
        "inputs": 2,
    }


MAX_BODY = (
    "^bb0(%in: f32, %out: f32):\n  %0 = arith.maximumf %in, %out : f32\n  linalg.yield %0 : f32"
)
SUM_BODY = MAX_BODY.replace("arith.maximumf", "arith.addf")


def test_a_body_tells_apart_roots_that_agree_on_everything_else() -> None:
    # The exp-once softmax: a row max and a row sum, each of one input and used by a
    # linalg.generic of two, in dispatches of their own.
    row = OpSignature("linalg.generic", (32, 256), "reduction", "f32")
    after = OpSignature("linalg.generic", (32, 256), "elementwise", "f32")
    maximum = Task("t0", (row, after), dispatches=["d0"])
    total = Task("t1", (row, after), dispatches=["d1"])
    census = _census("d0", (row, 1, "linalg.generic"), (after, 2, STORE)) + _census(
        "d1", (row, 1, "linalg.generic"), (after, 2, STORE)
    )
    census[0] = dataclasses.replace(census[0], body=MAX_BODY)
    census[2] = dataclasses.replace(census[2], body=SUM_BODY)
    model = ModelOps.of(census, [maximum, total])
    base = {"op": "linalg.generic", "shape": [32, 256], "dtype": "f32"}
    assert op_match(maximum, 0, model, by_kind=False) == {**base, "body": MAX_BODY}
    assert op_match(total, 0, model, by_kind=False) == {**base, "body": SUM_BODY}
    # Ops after them whose bodies are unknown (one reads a constant from outside its
    # body, which no match can name) stay ambiguous.
    with pytest.raises(Ambiguous) as caught:
        op_match(maximum, 1, model, by_kind=False)
    assert caught.value.other == "t1"


def test_a_task_below_min_share_is_tuned_again_if_an_earlier_run_gave_it_a_template(
    tmp_path: Path,
) -> None:
    task = Task("t0", (MATMUL,), dispatches=["d0"], share=0.005)
    model = ModelOps.of([], [task])
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60, min_share=0.01)
    first = prepare(task, model, {}, ModelConstants(""), tmp_path, options)
    assert first.recipe is None and first.reason == "0.5% of the call, below --min-share"
    # A re-run whose noisy profile puts a tuned task just below the threshold keeps it.
    (tmp_path / "t0.yaml").write_text("name: task_t0\n")
    again = prepare(task, model, {}, ModelConstants(""), tmp_path, options)
    assert again.recipe == tmp_path / "t0.yaml" and again.reason is None


def test_the_winning_values_fill_the_schedule(tmp_path: Path) -> None:
    schedule = [{"tile": {"sizes": [1, "${RH}", "${RW}"]}}, {"vectorize": {}}]
    assert substitute_plain(schedule, {"RH": 4, "RW": 16}, Where("t0.yaml")) == [
        {"tile": {"sizes": [1, 4, 16]}},
        {"vectorize": {}},
    ]
    # In the model recipe: the winner's values, and the template's own for the rest (a
    # user may fix a parameter in the template rather than sweep it).
    recipe = tmp_path / "t0.yaml"
    kernel = {"name": "t0", "match": {"op": "linalg.matmul"}, "schedule": schedule}
    template = {"parameters": {"RH": 1, "RW": 8, "FIXED": 2}, "kernels": [kernel]}
    template["kernels"][0]["schedule"] = [{"tile": {"sizes": ["${FIXED}", "${RH}", "${RW}"]}}]
    _write_task(recipe, template)
    best = Result("k", "t0.yaml", "x86", {"RH": 4, "RW": 16}, "ok", speedup=1.5)
    won = _tuning("t0", 1.0, recipe=recipe, rounds=1, best=best)
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    write_model_recipe(tmp_path / "m.yaml", MODEL, [won], options)
    written = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert written["kernels"][0]["schedule"] == [{"tile": {"sizes": [2, 4, 16]}}]
    # Steps with a `when`: those the winner ran, without their condition (the model
    # recipe does not declare the template's parameters).
    template["kernels"][0]["schedule"] = [
        {"tile": {"sizes": ["${RH}"], "when": "WAY == 'a'"}},
        {"tile": {"sizes": ["${RW}"], "when": "WAY == 'b'"}},
        {"vectorize": {}},
    ]
    template["parameters"]["WAY"] = "a"
    _write_task(recipe, template)
    won.best = Result("k", "t0.yaml", "x86", {"RH": 4, "RW": 16, "WAY": "b"}, "ok", speedup=1.5)
    write_model_recipe(tmp_path / "m.yaml", MODEL, [won], options)
    written = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert written["kernels"][0]["schedule"] == [{"tile": {"sizes": [16]}}, {"vectorize": {}}]
    # A name the template does not declare is an error naming the template.
    template["kernels"][0]["schedule"] = [{"tile": {"sizes": ["${NOPE}"]}}]
    _write_task(recipe, template)
    won.recipe = recipe
    with pytest.raises(RecipeError, match=r"t0.yaml.*\$\{NOPE\} is not declared"):
        write_model_recipe(tmp_path / "m.yaml", MODEL, [won], options)


def rowmajor_and_packed(tmp_path: Path) -> TaskTuning:
    """A matmul task (layer ffn.up) whose template, written to ``tmp_path``, has a
    rowmajor kernel and the packed mmt4d step, with a winning rowmajor candidate (k1,
    1.3x) and a packed one that did not win (k2, 1.01x)."""
    recipe = tmp_path / "t0.yaml"
    template = {
        "parameters": {"RH": 1, "LAYOUT": "rowmajor", "M0": 16, "N0": 32, "K0": 1},
        "graph": [{"mmt4d": {"tile": ["${M0}", "${N0}", "${K0}"], "when": "LAYOUT == 'packed'"}}],
        "kernels": [
            {
                "name": "t0",
                "match": {"op": "linalg.matmul", "used_by": STORE},
                "when": "LAYOUT == 'rowmajor'",
                "schedule": [{"tile": {"sizes": ["${RH}"]}}],
            }
        ],
    }
    _write_task(recipe, template)
    rowmajor = Result("k1", "t0.yaml", "x86", {"RH": 4, "LAYOUT": "rowmajor"}, "ok", speedup=1.3)
    packed = Result("k2", "t0.yaml", "x86", {"LAYOUT": "packed", "M0": 8}, "ok", speedup=1.01)
    task = Task("t0", (MATMUL,), dispatches=["d0"], layers=["ffn.up"])
    return TaskTuning(task, recipe=recipe, rounds=1, best=rowmajor, best_packed=packed)


def test_a_packed_winner_is_a_graph_step_for_its_layers_and_the_packed_recipe_packs_all(
    tmp_path: Path,
) -> None:
    tuning = rowmajor_and_packed(tmp_path)
    recipe, task, packed = tuning.recipe, tuning.task, tuning.best_packed
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    # The tasks' winners: the rowmajor kernel (the packed candidate did not win).
    assert write_model_recipe(tmp_path / "m.yaml", MODEL, [tuning], options) == 1
    written = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert "graph" not in written and "compile_flags" not in written
    assert written["kernels"] == [
        {
            "name": "t0",
            "match": {"op": "linalg.matmul", "used_by": STORE},  # the template's match
            "schedule": [{"tile": {"sizes": [4]}}],
        }
    ]
    # The packed alternative (raced on the whole model): the winner's tile, for the
    # task's layers only, and no kernel schedule for it.
    write_model_recipe(tmp_path / "p.yaml", MODEL, [tuning], options, packed=True)
    written = yaml.safe_load((tmp_path / "p.yaml").read_text())
    assert written["graph"] == [
        {"mmt4d": {"tile": [8, 32, 1], "ops": {"op": "linalg.matmul", "layer": ["ffn.up"]}}}
    ]
    assert written["compile_flags"] == ["--iree-llvmcpu-enable-ukernels=none"]
    assert written["kernels"] == []
    # A later run resumes the packed candidate with the rest of the task's state.
    again = TaskTuning(task, recipe=recipe)
    assert again.resume(tuning.state()) and again.best_packed == packed
    # The model rewrites the tasks came from start every model recipe.
    rewritten = ModelSpec("m", {"model": "m"}, ({"conv1x1_to_matmul": {}},))
    write_model_recipe(tmp_path / "p.yaml", rewritten, [tuning], options, packed=True)
    written = yaml.safe_load((tmp_path / "p.yaml").read_text())
    assert [next(iter(step)) for step in written["graph"]] == ["conv1x1_to_matmul", "mmt4d"]
    write_model_recipe(tmp_path / "m.yaml", rewritten, [tuning], options)
    written = yaml.safe_load((tmp_path / "m.yaml").read_text())
    assert written["graph"] == [{"conv1x1_to_matmul": {}}] and "compile_flags" not in written


def test_a_packed_winner_with_its_unpack_fused_keeps_fuse_unpack(tmp_path: Path) -> None:
    template = template_for(Task("t0", (MATMUL,), dispatches=["d0"], layers=["ffn.up"]), _matmul())
    recipe = tmp_path / "t0.yaml"
    _write_task(
        recipe,
        {"parameters": template.parameters, "graph": template.graph_document(), "kernels": []},
    )
    fused = {"LAYOUT": "packed", "M0": 8, "UNPACK": "fused"}
    packed = Result("k2", "t0.yaml", "x86", fused, "ok", speedup=1.2)
    task = Task("t0", (MATMUL,), dispatches=["d0"], layers=["ffn.up"])
    tuning = TaskTuning(task, recipe=recipe, rounds=1, best=packed, best_packed=packed)
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    write_model_recipe(tmp_path / "p.yaml", MODEL, [tuning], options, packed=True)
    (step,) = yaml.safe_load((tmp_path / "p.yaml").read_text())["graph"]
    assert step == {
        "mmt4d": {
            "tile": [8, 32, 1],
            "fuse_unpack": True,
            "ops": {"op": "linalg.matmul", "layer": ["ffn.up"]},
        }
    }
    # A template edited so that no mmt4d step applies is named, not a StopIteration.
    _write_task(recipe, {"parameters": template.parameters, "kernels": []})
    with pytest.raises(RecipeError, match=r"t0.yaml: graph: no mmt4d step applies") as info:
        write_model_recipe(tmp_path / "p.yaml", MODEL, [tuning], options, packed=True)
    assert "UNPACK=fused" in str(info.value)


GATHER = """\
#in = affine_map<(c, kh, kw, h, w) -> (c, h * 2 + kh, w * 2 + kw)>
#out = affine_map<(c, kh, kw, h, w) -> (c, kh, kw, h, w)>
func.func @gather(%x: tensor<16x33x33xf32>) -> tensor<16x3x3x16x16xf32> {
  %e = tensor.empty() : tensor<16x3x3x16x16xf32>
  %g = linalg.generic {indexing_maps = [#in, #out],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<16x33x33xf32>) outs(%e : tensor<16x3x3x16x16xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<16x3x3x16x16xf32>
  return %g : tensor<16x3x3x16x16xf32>
}
"""


def _tune_one_task(
    model_text: str,
    kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: Sequence[str] = (),
) -> dict[str, object]:
    """Tune a linalg model for a quarter of a minute on 1 thread (with ``options``); its one task
    of ``kind`` must have a template whose every candidate (4 at least: one wave of
    --jobs 4, what a budget the other steps use up still gives it) matched IREE default,
    and the model recipe must be right. Returns the task's template recipe."""
    model = tmp_path / "model.mlir"
    model.write_text(model_text)
    args = ["tune", str(model), "--threads", "1", "--budget", "0.25", "--round-size", "4"]
    args += ["--jobs", "4", *options]
    assert main([*args, "--repeats", "3", "--out", str(tmp_path / "m.tune"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["status"] == "ok"
    (task,) = [t for t in report["tasks"] if t["kind"] == kind]
    assert task["recipe"], task["reason"]
    assert task["candidates"] >= 4 and task["failed"] == 0
    template: dict[str, object] = yaml.safe_load(Path(task["recipe"]).read_text())
    return template


def test_an_im2col_gather_task_is_tuned_with_the_elementwise_template(
    iree: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stride-2 im2col gather (five dims, more than a workgroup tile may split): every
    candidate builds and matches IREE default's results, and the model recipe is right."""
    template: Any = _tune_one_task(GATHER, "elementwise", tmp_path, capsys)
    steps = [next(iter(step)) for step in template["kernels"][0]["schedule"]]
    assert steps == ["fuse_ext", "tile", "cleanup", "vectorize"]
    tiles = template["kernels"][0]["schedule"][0]["fuse_ext"]["tile_sizes"]
    assert sum(size != 0 for size in tiles) <= 3  # a forall maps at most x, y and z


TRANSPOSED = """
func.func @key(%x: tensor<32x48xf32>, %w: tensor<48x64xf32>, %b: tensor<64xf32>)
    -> tensor<64x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %m = linalg.matmul ins(%x, %w : tensor<32x48xf32>, tensor<48x64xf32>)
      outs(%f : tensor<32x64xf32>) -> tensor<32x64xf32>
  %t = tensor.empty() : tensor<64x32xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                       affine_map<(i, j) -> (j, i)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<32x64xf32>, tensor<64xf32>) outs(%t : tensor<64x32xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    linalg.yield %s : f32
  } -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}
"""


def test_a_matmul_whose_epilogue_writes_transposed_is_tuned_and_right(
    iree: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key projection: bias added, the result written transposed. Its template tiles
    the epilogue over the matmul's output; every candidate matches IREE default."""
    template: Any = _tune_one_task(TRANSPOSED, "contraction", tmp_path, capsys)
    assert template["space"]["EPILOGUE"] == ["buffer", "fused"]
    assert "RH > 1" in template["constraints"]


ACCUMULATED = """
func.func @acc(%x: tensor<64x96xf32>, %w: tensor<96x48xf32>, %bias: tensor<64x48xf32>)
    -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %m = linalg.matmul ins(%x, %w : tensor<64x96xf32>, tensor<96x48xf32>)
      outs(%bias : tensor<64x48xf32>) -> tensor<64x48xf32>
  %e = tensor.empty() : tensor<64x48xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<64x48xf32>) outs(%e : tensor<64x48xf32>) {
  ^bb0(%v: f32, %o: f32):
    %p = arith.maximumf %v, %zero : f32
    linalg.yield %p : f32
  } -> tensor<64x48xf32>
  return %r : tensor<64x48xf32>
}
"""


def test_a_matmul_accumulating_into_a_bias_then_activated_is_tuned_and_right(
    iree: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A convolution's matmul that accumulates into its bias, then a ReLU (an ONNX Conv
    with bias): IREE's dispatch holds a fill, the matmul, an add and the ReLU. The
    template takes the chain of two ops after the root: the add fused into the ReLU's
    register loop; every candidate matches IREE default."""
    template: Any = _tune_one_task(ACCUMULATED, "contraction", tmp_path, capsys)
    schedule = template["kernels"][0]["schedule"]
    handles = [step["producer"] for step in schedule if "producer" in step]
    assert handles[:2] == [
        {"operand": 0, "as": "epilogue1"},
        {"of": "epilogue1", "operand": 0, "as": "main"},
    ]
    fused = [step["fuse_into"]["producer"] for step in schedule if "fuse_into" in step]
    assert fused.count("epilogue1") == 2  # in both ways through the epilogue
    assert template["space"]["EPILOGUE"] == ["buffer", "fused"]


def test_a_tune_builds_for_the_cpu_it_is_asked_for(
    iree: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--cpu haswell: the profile, the sweeps and the checks build for an AVX2 CPU (the
    sweeps record it), and the state is kept for that CPU, apart from the host's."""
    _tune_one_task(TRANSPOSED, "contraction", tmp_path, capsys, ["--cpu", "haswell"])
    out = tmp_path / "m.tune"
    state = json.loads((out / "tune-state.json").read_text())
    assert state["identity"]["cpu"] == "haswell"
    db = sqlite3.connect(out / "tune.db")
    swept = [json.loads(row[0])["cpu"] for row in db.execute("SELECT options FROM sweeps")]
    db.close()
    assert swept and set(swept) == {"haswell"}


def test_tune_writes_a_model_recipe_that_is_correct_and_a_rerun_reuses_it(
    iree: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cnn.tune"
    args = ["tune", "small_cnn", "--threads", "1", "--budget", "0.25", "--out", str(out)]
    args += ["--round-size", "4", "--min-share", "0.1", "--repeats", "3"]
    args += ["--plot", str(tmp_path / "tune.png"), "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["run"]["status"] == "ok" and first["run"]["reference"] == "numpy"
    assert first["plot"] == str(tmp_path / "tune.png") and (tmp_path / "tune.png").stat().st_size
    by_task = {t["task"]: t for t in first["tasks"]}
    tuned = [t for t in by_task.values() if t["recipe"]]
    assert tuned, "no task got a template"
    assert all(Path(t["recipe"]).exists() for t in tuned)
    # A quarter of a minute is less than the graph race, the profile and the checks after the
    # sweeps take: every task with a template still gets a first round, of at least
    # one wave of compiles (--jobs, one per core), and the budget line says so.
    state = json.loads((out / "tune-state.json").read_text())
    assert all(state["tasks"][t["task"]]["rounds"] >= 1 for t in tuned)
    assert all(t["candidates"] >= 1 for t in tuned)
    # block1's convs form one task although conv2's epilogue adds the residual.
    block1 = [t for t in by_task.values() if "block1.conv2" in t["layers"]]
    assert len(block1) == 1 and block1[0]["recipe"], block1
    below = [t for t in by_task.values() if t["share"] < 0.1]
    assert below and all("below --min-share" in t["reason"] for t in below)
    recipe = yaml.safe_load(Path(first["recipe"]).read_text())
    assert recipe["workload"] == {"model": "small_cnn", "args": {}}
    # The kept recipe may be the packed alternative: its packed tasks are mmt4d steps.
    packed = [step for step in recipe.get("graph", []) if "mmt4d" in step]
    assert len(recipe["kernels"]) + len(packed) == first["kernels"]
    assert all(step["mmt4d"]["ops"]["layer"] for step in packed)
    for kernel in recipe["kernels"]:
        assert "${" not in json.dumps(kernel), "a parameter was left in the schedule"
        assert by_task[kernel["name"]]["kept"] == "schedule"
    assert [t["task"] for t in recipe["provenance"]["tasks"]] == list(by_task)
    # The budget is spent: a second run sweeps nothing and takes up what the first found.
    assert state["spent_s"] >= 15 and state["after_s"] > 0 and state["profile_s"] > 0
    assert len(state["history"]) == sum(t["rounds"] for t in state["tasks"].values())
    assert main([*args[:-1], "--no-check", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    again = {t["task"]: t for t in second["tasks"]}
    for name, t in by_task.items():
        assert again[name]["candidates"] == t["candidates"]
        assert again[name]["speedup"] == t["speedup"] and again[name]["kept"] == t["kept"]
    assert second["kernels"] == first["kernels"]
    assert second["spent_s"] >= first["spent_s"]


def test_a_task_resumes_from_its_saved_state_only_for_the_same_template(tmp_path: Path) -> None:
    recipe = tmp_path / "t0.yaml"
    recipe.write_text("name: task_t0\n")
    best = Result("k", "t0.yaml", "x86", {"RW": 16}, "ok", speedup=1.5, confirmed_speedup=1.4)
    done = _tuning("t0", 2.0, recipe=recipe, candidates=16, rounds=2, best=best)
    saved = json.loads(json.dumps(done.state()))  # as written to the state file
    again = _tuning("t0", 2.0, recipe=recipe)
    assert again.resume(saved)
    assert (again.rounds, again.candidates, again.speedup) == (2, 16, 1.4)
    assert again.best is not None and again.best.params == {"RW": 16}
    recipe.write_text("name: task_t0  # edited\n")
    edited = _tuning("t0", 2.0, recipe=recipe)
    assert not edited.resume(saved) and edited.rounds == 0


def test_a_task_s_speedup_is_the_median_of_the_races_its_best_ran_in(tmp_path: Path) -> None:
    """One race on a noisy stretch (1.08x where two earlier races measured 1.6x and
    1.5x) moves the task's speedup to the median, not to that race's figure."""
    recipe = tmp_path / "t0.yaml"
    recipe.write_text("name: task_t0\n")
    best = Result("k", "t0.yaml", "x86", {"RW": 16}, "ok", speedup=1.7, confirmed_speedup=1.08)
    raced = {"k": [1.6, 1.5, 1.08], "other": [1.2]}
    tuning = _tuning("t0", 2.0, recipe=recipe, rounds=3, best=best, raced=raced)
    assert tuning.speedup == 1.5 and tuning.won
    saved = json.loads(json.dumps(tuning.state()))
    again = _tuning("t0", 2.0, recipe=recipe)
    assert again.resume(saved) and again.raced == raced and again.speedup == 1.5
    # a state written before race histories were kept: the last race's figure
    del saved["raced"]
    older = _tuning("t0", 2.0, recipe=recipe)
    assert older.resume(saved) and older.raced == {} and older.speedup == 1.08
    # a best that never raced: its screening speedup
    fresh = Result("n", "t0.yaml", "x86", {"RW": 8}, "ok", speedup=1.3)
    assert _tuning("t0", 2.0, recipe=recipe, best=fresh, raced=raced).speedup == 1.3


def _saved_task() -> dict[str, Any]:
    """A task's state as a tune saves it."""
    best = Result("k", "t0.yaml", "x86", {"RW": 16}, "ok", speedup=1.5)
    done = _tuning("t0", 2.0, recipe=None, rounds=1, candidates=8, best=best, raced={"k": [1.5]})
    return json.loads(json.dumps(done.state()))


def test_the_tune_state_is_kept_per_model_target_and_threads(tmp_path: Path) -> None:
    identity = {"model": "net", "target": "x86", "threads": 1}
    save_state(tmp_path, TuneState(identity, 90.0, {"t0": _saved_task()}))
    state, note = load_state(tmp_path, identity)
    assert note is None and state.spent_s == 90.0 and state.tasks == {"t0": _saved_task()}
    other, note = load_state(tmp_path, {**identity, "threads": 2})
    assert other.spent_s == 0.0 and not other.tasks
    assert note is not None and "the budget starts afresh" in note
    path = tmp_path / "tune-state.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "version": 0, "tasks": 7}))
    older, note = load_state(tmp_path, identity)
    assert older.spent_s == 0.0 and note is not None and "another version" in note


_MISSING = object()


def _state_with(at: tuple[str | int, ...], value: object) -> str:
    """A saved state's JSON with ``value`` at the field ``at`` (``_MISSING``: without
    that field; no field: ``value`` is the whole document)."""
    identity = {"model": "net", "target": "x86", "threads": 1}
    history = [{"spent_s": 42.0, "task": "t0", "speedup": 1.3, "estimate": 1.1}]
    document: Any = {
        "version": 1,
        "identity": identity,
        "spent_s": 42.0,
        "tasks": {"t0": _saved_task()},
        "history": history,
    }
    if not at:
        return json.dumps(value)
    parent = document
    for key in at[:-1]:
        parent = parent[key]
    if value is _MISSING:
        del parent[at[-1]]
    elif isinstance(parent, list) and at[-1] == len(parent):
        parent.append(value)
    else:
        parent[at[-1]] = value
    return json.dumps(document)


@pytest.mark.parametrize(
    ("at", "value", "expected"),
    [
        (("spent_s",), -600, "spent_s: expected a number of seconds >= 0, got -600"),
        (("spent_s",), "10", 'spent_s: expected a number of seconds >= 0, got "10"'),
        (("spent_s",), math.nan, "not JSON (NaN is not a JSON number)"),
        (("spent_s",), _MISSING, "the top level: the field 'spent_s' is missing"),
        (("tasks",), [], "tasks: expected an object, got a list"),
        (("tasks", "t0"), None, "tasks.t0: expected an object, got null"),
        (("tasks", "t0", "rounds"), -1, "tasks.t0.rounds: expected an integer >= 0, got -1"),
        (("tasks", "t0", "best"), _MISSING, "tasks.t0: the field 'best' is missing"),
        (("tasks", "t0", "best", "colour"), 1, "tasks.t0.best: unknown field 'colour'"),
        (
            ("tasks", "t0", "best", "speedup"),
            "fast",
            'tasks.t0.best.speedup: expected a number, got "fast"',
        ),
        (("tasks", "t0", "raced", "k", 0), 0, "tasks.t0.raced.k[0]: expected a speedup > 0"),
        (("history",), {}, "history: expected a list, got an object"),
        (("history", 1), 3, "history[1]: expected an object, got 3"),
        (("history", 0, "task"), _MISSING, "history[0]: the field 'task' is missing"),
        ((), [], "not a tune state: a JSON list, not an object"),
        ((), 42, "not a tune state: a JSON number, not an object"),
    ],
)
def test_a_state_file_tdsched_did_not_write_is_refused_naming_the_field(
    tmp_path: Path, at: tuple[str | int, ...], value: object, expected: str
) -> None:
    """A negative ``spent_s`` made the budget endless; other shapes were tracebacks."""
    (tmp_path / "tune-state.json").write_text(_state_with(at, value))
    with pytest.raises(StateError) as raised:
        load_state(tmp_path, {"model": "net", "target": "x86", "threads": 1})
    (line,) = str(raised.value).splitlines()
    assert line.startswith(f"{tmp_path / 'tune-state.json'}: ") and expected in line, line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{not json", "not a tune state, not JSON (Expecting property name"),
        (b"[" * 100_000, "not a tune state, not JSON (nested too deeply)"),
        (b'{"spent_s": "caf\xe9"}', "cannot read the tune state ("),
        (None, "is a folder, where tdsched tune keeps its state file; remove it"),
    ],
)
def test_a_state_file_that_is_not_json_is_refused(
    tmp_path: Path, content: bytes | None, expected: str
) -> None:
    path = tmp_path / "tune-state.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(StateError) as raised:
        read_state(tmp_path)
    (line,) = str(raised.value).splitlines()
    assert line.startswith(f"{path}: {expected}"), line


def test_the_tune_state_keeps_a_line_per_round_and_older_states_have_none(
    tmp_path: Path,
) -> None:
    identity = {"model": "net", "target": "x86", "threads": 1}
    line = {"spent_s": 42.0, "task": "t0", "speedup": 1.3, "estimate": 1.1}
    save_state(tmp_path, TuneState(identity, 42.0, {}, [line]))
    assert load_state(tmp_path, identity)[0].history == [line]
    path = tmp_path / "tune-state.json"
    older = json.loads(path.read_text())
    del older["history"]
    path.write_text(json.dumps(older))
    state, note = load_state(tmp_path, identity)
    assert note is None and state.history == [] and state.spent_s == 42.0


def test_the_tune_chart_is_drawn_from_the_history_and_the_tasks(tmp_path: Path) -> None:
    won = _tuning("t0", 2.0, rounds=1, best=Result("k", "t0.yaml", "x86", {}, "ok", speedup=2.0))
    lost = _tuning("t1", 1.0, rounds=1)
    tasks = ModelTasks("net", "x86", 1, (won.task, lost.task), Timing.of([4.0]))
    history = [
        {"spent_s": 30.0, "task": "t0", "speedup": 2.0, "estimate": 1.33},
        {"spent_s": 60.0, "task": "t1", "speedup": None, "estimate": 1.33},
    ]
    outcome = TuneOutcome(
        tasks, [won, lost], tmp_path / "m.yaml", 60.0, 1, 60.0, None, 1.0, history
    )
    plot_tune(outcome, 1.3, tmp_path / "tune.png", "tune of net")
    assert (tmp_path / "tune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_layout_race_is_reused_only_for_the_same_two_recipes(tmp_path: Path) -> None:
    record = tmp_path / LAYOUT_RACE_FILE
    key = {"tasks": "aaa", "packed": "bbb"}
    choices = ("tasks", "packed")
    assert earlier_race(record, key, choices) is None  # never raced
    line = "layouts  packed matmuls 1.37x vs 1.10x: kept (from p.yaml)"
    record.write_text(json.dumps({"key": key, "kept": "packed", "line": line}))
    assert earlier_race(record, key, choices) == {"key": key, "kept": "packed", "line": line}
    # Another task winner or packed candidate since: race again.
    assert earlier_race(record, {"tasks": "aaa", "packed": "ccc"}, choices) is None
    record.write_text(json.dumps({"key": key, "kept": "maybe", "line": line}))
    assert earlier_race(record, key, choices) is None
    record.write_text("{not json")
    assert earlier_race(record, key, choices) is None


def test_the_layout_race_decides_a_close_call_on_medians_of_three_runs(tmp_path: Path) -> None:
    tasks_recipe, packed = tmp_path / "m.tuned.yaml", tmp_path / "m.packed.yaml"
    tasks_recipe.write_text("name: m\nkernels: [a, b, c]\n")
    packed.write_text("name: m\nkernels: [a]\n")

    def outcome() -> TuneOutcome:
        tasks = ModelTasks("m", "x86", 1, (), None)
        return TuneOutcome(tasks, [], tasks_recipe, 60.0, 3, 60.0, (packed, 1))

    raced: list[str] = []
    # A clear loss for packed (1.0x against 1.3x): one run each, nothing changes.
    speedups: dict[str, float | list[float]] = {tasks_recipe.name: 1.3, packed.name: 1.0}
    clear = outcome()
    race = race_layouts(clear, _graph_run(speedups, raced))
    report, line = race.report, race.line
    assert race.packed_failure is None
    assert raced == [tasks_recipe.name, packed.name] and clear.kernels == 3
    assert line == f"layouts  packed matmuls 1.00x vs 1.30x: not kept ({packed})"
    assert report is not None and report.speedup == 1.3
    # Within 10% (1.25x against 1.20x): both run three times, and the medians keep the
    # tasks' recipe (1.22x against 1.19x).
    (tmp_path / LAYOUT_RACE_FILE).unlink()
    raced.clear()
    speedups = {tasks_recipe.name: [1.2, 1.22, 1.3], packed.name: [1.25, 1.19, 1.1]}
    close = outcome()
    race = race_layouts(close, _graph_run(speedups, raced))
    report, line = race.report, race.line
    assert raced == [tasks_recipe.name, packed.name] + [tasks_recipe.name] * 2 + [packed.name] * 2
    assert close.kernels == 3 and "[a, b, c]" in tasks_recipe.read_text()
    assert report is not None and report.speedup == 1.2  # the kept recipe's first run
    assert line is not None and line.startswith(
        "layouts  packed matmuls 1.19x vs 1.22x (medians of 3 runs each): not kept"
    )


def test_without_a_check_a_recorded_layout_decision_is_still_taken_up(tmp_path: Path) -> None:
    # A re-run with --no-check must not put back the tasks' recipe the race set aside.
    tasks_recipe, packed = tmp_path / "m.tuned.yaml", tmp_path / "m.packed.yaml"
    tasks_recipe.write_text("name: m\nkernels: [a, b, c]\n")
    packed.write_text("name: m\nkernels: [a]\n")
    outcome = TuneOutcome(
        ModelTasks("m", "x86", 1, (), None), [], tasks_recipe, 60.0, 3, 60.0, (packed, 1)
    )
    assert race_layouts(outcome, None) == LayoutRace(None, None)  # never raced: nothing changes
    assert outcome.kernels == 3 and "[a, b, c]" in tasks_recipe.read_text()
    key = {"tasks": schedules_digest(tasks_recipe), "packed": schedules_digest(packed)}
    line = "layouts  packed matmuls 1.37x vs 1.10x: kept (from m.packed.yaml)"
    record = {"key": key, "kept": "packed", "line": line}
    (tmp_path / LAYOUT_RACE_FILE).write_text(json.dumps(record))
    assert race_layouts(outcome, None) == LayoutRace(None, f"{line} (raced by an earlier run)")
    assert outcome.kernels == 1 and tasks_recipe.read_text() == packed.read_text()


CONVS_1X1_3X3 = """
func.func @m(%x: tensor<1x8x8x4xf32>, %w: tensor<1x1x4x6xf32>, %w3: tensor<3x3x6x6xf32>)
    -> tensor<1x2x2x6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x6xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x6xf32>) -> tensor<1x4x4x6xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x8x4xf32>, tensor<1x1x4x6xf32>) outs(%f : tensor<1x4x4x6xf32>) -> tensor<1x4x4x6xf32>
  %e3 = tensor.empty() : tensor<1x2x2x6xf32>
  %f3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<1x2x2x6xf32>) -> tensor<1x2x2x6xf32>
  %d = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%c, %w3 : tensor<1x4x4x6xf32>, tensor<3x3x6x6xf32>) outs(%f3 : tensor<1x2x2x6xf32>) -> tensor<1x2x2x6xf32>
  return %d : tensor<1x2x2x6xf32>
}
"""


THREE_3X3_CONVS = """
func.func @m(%x: tensor<1x10x10x4xf32>, %w: tensor<3x3x4x4xf32>)
    -> (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1x4x4x4xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x8x4xf32>
  %fa = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %fb = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %es = tensor.empty() : tensor<1x4x4x4xf32>
  %fs = linalg.fill ins(%z : f32) outs(%es : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %a = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, tdsched.layer = "a"}
      ins(%x, %w : tensor<1x10x10x4xf32>, tensor<3x3x4x4xf32>) outs(%fa : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %b = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, tdsched.layer = "b"}
      ins(%x, %w : tensor<1x10x10x4xf32>, tensor<3x3x4x4xf32>) outs(%fb : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %s = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>, tdsched.layer = "s"}
      ins(%x, %w : tensor<1x10x10x4xf32>, tensor<3x3x4x4xf32>) outs(%fs : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %a, %b, %s : tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>, tensor<1x4x4x4xf32>
}
"""


def _graph_run(
    speedups: dict[str, float | list[float]], raced: list[str]
) -> Callable[[Path], RunReport]:
    """A stand-in for tune's model runs: each recipe's speedup from ``speedups`` (by file
    name; a list gives one run's speedup after another), the names appended to ``raced``."""

    def check(recipe: Path) -> RunReport:
        raced.append(recipe.name)
        given = speedups[recipe.name]
        speedup = given.pop(0) if isinstance(given, list) else given
        return RunReport(
            "m_graph", "x86", "m", {}, 1, "iree-default", status=Status.OK, speedup=speedup
        )

    return check


def test_a_rewrite_that_loses_on_every_convolution_is_raced_per_group_of_identical_ones(
    tmp_path: Path,
) -> None:
    from tdsched.targets.workload import workload_from_text

    workload = workload_from_text(THREE_3X3_CONVS, "m.mlir", "m", None)
    raced: list[str] = []
    x86 = make_target("x86")
    spec = {"file": "m.mlir"}
    # Every convolution as a gather loses; the two identical ones (most FLOP) win on
    # their own, the strided one on top of them does not.
    speedups: dict[str, float | list[float]]
    speedups = {"m.im2col.yaml": 0.9, "m.im2col-1.yaml": 1.2, "m.im2col-2.yaml": 1.05}
    kept = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert raced == ["m.im2col.yaml", "m.im2col-1.yaml", "m.im2col-2.yaml"]
    assert kept.steps == ({"im2col": {"ops": {"layer": ["a", "b"]}}},) and kept.speedup == 1.2
    assert kept.workload.mlir.count("linalg.conv_2d_nhwc_hwcf") == 1
    whole, group, strided = kept.lines
    assert whole.endswith("0.90x IREE default, not kept")
    assert "graph    im2col on a, b (rewrote 2 linalg.conv_2d_nhwc_hwcf" in group
    assert group.endswith("1.20x IREE default, kept: the tasks are the rewritten model's")
    assert strided.startswith("graph    + im2col on s (rewrote 3 linalg.conv_2d_nhwc_hwcf")
    assert strided.endswith("1.05x IREE default (without it 1.20x), not kept")
    # The second group's recipe extends the first's selection instead of adding a step.
    graph = yaml.safe_load((tmp_path / "m.im2col-2.yaml").read_text())
    assert graph["graph"] == [{"im2col": {"ops": {"layer": ["a", "b", "s"]}}}]
    # A re-run takes up the limited step from the record.
    again = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert len(raced) == 3 and again.steps == kept.steps
    assert again.workload.mlir == kept.workload.mlir
    # A record whose steps it cannot read is raced again, not a crash.
    record = json.loads((tmp_path / GRAPH_RACE_FILE).read_text())
    record["steps"] = [{"im2col": {"ops": ["a"]}}]
    (tmp_path / GRAPH_RACE_FILE).write_text(json.dumps(record))
    race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert len(raced) == 6


def test_graph_steps_are_raced_again_by_group_the_other_way_round(tmp_path: Path) -> None:
    """With a configuration's flags, each group of convolutions an im2col step takes is
    tried left to IREE as a convolution, most FLOP first; what wins is kept, and the
    recipes raced keep the flags and tolerance of the recipe they prune."""
    from tdsched.targets.workload import workload_from_text

    workload = workload_from_text(THREE_3X3_CONVS, "m.mlir", "m", None)
    flags = ["--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=none"]
    tolerance = {"atol": 0.001, "rtol": 0.001}
    recipe = tmp_path / "m.dt.graph.yaml"
    recipe.write_text(yaml.safe_dump({"compile_flags": flags, "tolerance": tolerance}))
    raced: list[str] = []
    # a and b (the group with most FLOP) run faster as convolutions; s then does not
    speedups: dict[str, float | list[float]]
    speedups = {"m.dt.graph.without-1.yaml": 2.4, "m.dt.graph.without-2.yaml": 2.0}
    said: list[str] = []
    pruned = prune_conv_rewrites(
        workload,
        {"file": "m.mlir"},
        tmp_path,
        make_target("x86"),
        _graph_run(speedups, raced),
        [{"im2col": {}}],
        recipe,
        2.0,
        "m.dt.graph",
        said.append,
    )
    assert raced == ["m.dt.graph.without-1.yaml", "m.dt.graph.without-2.yaml"]
    assert said == list(pruned.lines)  # each line as it is decided
    assert pruned.graph == [{"im2col": {"ops": {"layer": ["s"]}}}]
    assert pruned.recipe == tmp_path / "m.dt.graph.without-1.yaml"
    first, second = pruned.lines
    assert first == (
        "graph    im2col without a, b: 2.40x IREE default (without it 2.00x), "
        "kept: those convolutions stay convolutions"
    )
    assert second == "graph    im2col without s: 2.00x IREE default (without it 2.40x), not kept"
    written = yaml.safe_load(pruned.recipe.read_text())
    assert written["compile_flags"] == flags and written["tolerance"] == tolerance
    # the last group left to IREE drops the step
    assert yaml.safe_load((tmp_path / "m.dt.graph.without-2.yaml").read_text())["graph"] == []
    # A step limited to some layers is pruned within them; one whose convolutions
    # cannot all be named by layer is not raced.
    limited = prune_conv_rewrites(
        workload,
        {"file": "m.mlir"},
        tmp_path,
        make_target("x86"),
        _graph_run({"m.l.without-1.yaml": 1.0, "m.l.without-2.yaml": 1.0}, raced),
        [{"im2col": {"ops": {"layer": ["a", "s"]}}}],
        recipe,
        2.0,
        "m.l",
    )
    assert raced[2:] == ["m.l.without-1.yaml", "m.l.without-2.yaml"]
    without_a = yaml.safe_load((tmp_path / "m.l.without-1.yaml").read_text())["graph"]
    assert without_a == [{"im2col": {"ops": {"layer": ["s"]}}}]
    assert limited.graph == [{"im2col": {"ops": {"layer": ["a", "s"]}}}]


def test_a_close_call_in_the_model_rewrite_race_is_decided_on_medians_of_three_runs(
    tmp_path: Path,
) -> None:
    from tdsched.targets.workload import workload_from_text

    workload = workload_from_text(CONVS_1X1_3X3, "m.mlir", "m", None)
    x86, spec = make_target("x86"), {"file": "m.mlir"}
    conv1x1, im2col = "m.conv1x1_to_matmul.yaml", "m.im2col.yaml"
    # conv1x1_to_matmul's first run (0.97x) is within 10% of the bar (1.02x, over IREE
    # default itself): two more runs, and their median (1.05x) keeps it. im2col's first
    # (1.12x) is close to the bar on top of it (1.05x x 1.02); the kept steps have their
    # three runs already, im2col gets two more, and its median (1.06x) is not enough.
    raced: list[str] = []
    speedups: dict[str, float | list[float]] = {
        conv1x1: [0.97, 1.05, 1.2],
        im2col: [1.12, 1.06, 1.01],
    }
    kept = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert raced == [conv1x1] * 3 + [im2col] * 3
    assert kept.steps == ({"conv1x1_to_matmul": {}},) and kept.speedup == 1.05
    first, second = kept.lines
    assert first.endswith(
        "1.05x IREE default (median of 3 runs: 0.97x, 1.05x, 1.20x), kept: the tasks are the "
        "rewritten model's"
    )
    assert second.endswith(
        "1.06x IREE default (median of 3 runs: 1.12x, 1.06x, 1.01x) (without it 1.05x), not kept"
    )
    # Kept on one clear run (1.5x), the steps before a close call are run again too, and
    # the medians compare: 1.55x against 1.5x x 1.02.
    (tmp_path / GRAPH_RACE_FILE).unlink()
    raced.clear()
    speedups = {conv1x1: [1.5, 1.45, 1.52], im2col: [1.55, 1.6, 1.5]}
    both = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert raced == [conv1x1, im2col, im2col, im2col, conv1x1, conv1x1]
    assert both.steps == ({"conv1x1_to_matmul": {}}, {"im2col": {}}) and both.speedup == 1.55
    assert both.lines[1].endswith("(without it 1.50x), kept: the tasks are the rewritten model's")


def test_the_model_rewrite_race_keeps_each_rewrite_that_pays_on_top_of_those_before(
    tmp_path: Path,
) -> None:
    from tdsched.targets.workload import workload_from_text

    workload = workload_from_text(CONVS_1X1_3X3, "m.mlir", "m", None)
    raced: list[str] = []

    x86 = make_target("x86")
    spec = {"file": "m.mlir"}
    # im2col is slower than conv1x1_to_matmul alone: only the first is kept.
    speedups: dict[str, float | list[float]]
    speedups = {"m.conv1x1_to_matmul.yaml": 1.5, "m.im2col.yaml": 1.3}
    kept = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert raced == ["m.conv1x1_to_matmul.yaml", "m.im2col.yaml"]
    assert kept.steps == ({"conv1x1_to_matmul": {}},) and kept.speedup == 1.5
    assert "linalg.matmul" in kept.workload.mlir and "conv_2d_nhwc_hwcf" in kept.workload.mlir
    first, second = kept.lines
    assert "conv1x1_to_matmul (rewrote 1 linalg.conv_2d_nhwc_hwcf into linalg.matmul)" in first
    assert first.endswith("1.50x IREE default, kept: the tasks are the rewritten model's")
    assert second.startswith("graph    + im2col (rewrote 1 linalg.conv_2d_nhwc_hwcf")
    assert second.endswith("1.30x IREE default (without it 1.50x), not kept")
    graph = yaml.safe_load((tmp_path / "m.im2col.yaml").read_text())
    assert graph["graph"] == [{"conv1x1_to_matmul": {}}, {"im2col": {}}]
    assert graph["workload"] == spec
    # A re-run reuses the recorded decisions without running the model again.
    again = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert len(raced) == 2 and again.steps == kept.steps and again.speedup == 1.5
    assert again.workload.mlir == kept.workload.mlir
    assert all(line.endswith("(raced by an earlier run)") for line in again.lines)
    # Both pay: the tasks come from the model with every convolution a matmul.
    (tmp_path / GRAPH_RACE_FILE).unlink()
    speedups["m.im2col.yaml"] = 2.0
    both = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert both.steps == ({"conv1x1_to_matmul": {}}, {"im2col": {}}) and both.speedup == 2.0
    assert "conv_2d" not in both.workload.mlir
    # Neither is faster by the tune's margin: the model stays as imported.
    (tmp_path / GRAPH_RACE_FILE).unlink()
    slower: dict[str, float | list[float]]
    slower = {"m.conv1x1_to_matmul.yaml": 0.8, "m.im2col.yaml": 0.85}
    none = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(slower, raced))
    assert none.steps == () and none.workload is workload
    assert len(none.lines) == 2 and all("not kept" in line for line in none.lines)
    # A model no rewrite changes races nothing.
    plain = workload_from_text(MATMUL_MODULE, "mm.mlir", "mm", None)
    nothing = race_model_rewrites(plain, {"file": "mm.mlir"}, tmp_path, x86, lambda r: 1 / 0)
    assert nothing.steps == () and nothing.lines == ()


NCHW_CONVS = """
func.func @m(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x1x1xf32>, %w3: tensor<6x6x3x3xf32>) -> tensor<1x6x6x6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x8x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x6x8x8xf32>) -> tensor<1x6x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x4x8x8xf32>, tensor<6x4x1x1xf32>) outs(%f : tensor<1x6x8x8xf32>) -> tensor<1x6x8x8xf32>
  %e3 = tensor.empty() : tensor<1x6x6x6xf32>
  %f3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<1x6x6x6xf32>) -> tensor<1x6x6x6xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%c, %w3 : tensor<1x6x8x8xf32>, tensor<6x6x3x3xf32>) outs(%f3 : tensor<1x6x6x6xf32>) -> tensor<1x6x6x6xf32>
  return %d : tensor<1x6x6x6xf32>
}
"""


def test_a_model_with_nchw_convolutions_is_raced_in_both_layouts(tmp_path: Path) -> None:
    from tdsched.targets.workload import workload_from_text

    workload = workload_from_text(NCHW_CONVS, "m.mlir", "m", None)
    x86, spec = make_target("x86"), {"file": "m.mlir"}
    raced: list[str] = []
    # NCHW: conv1x1_to_matmul 1.5x, im2col on top 1.2x (not kept). NHWC: channels_last
    # alone 0.9x (the base all the same), conv1x1_to_matmul on it 1.2x, im2col 2.0x: NHWC.
    speedups: dict[str, float | list[float]] = {
        "m.conv1x1_to_matmul.yaml": 1.5,
        "m.im2col.yaml": 1.2,
        "m.channels_last.yaml": 0.9,
        "m.channels_last.conv1x1_to_matmul.yaml": 1.2,
        "m.channels_last.im2col.yaml": 2.0,
    }
    kept = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert raced == list(speedups)
    assert kept.steps == ({"channels_last": {}}, {"conv1x1_to_matmul": {}}, {"im2col": {}})
    assert kept.speedup == 2.0 and "nchw" not in kept.workload.mlir
    assert kept.lines[2].startswith("graph    [NHWC] channels_last (converted 2 NCHW ops")
    assert kept.lines[2].endswith("0.90x IREE default, the base of this race")
    assert kept.lines[3].startswith("graph    [NHWC] + conv1x1_to_matmul (rewrote 1 ")
    assert kept.lines[-1] == "layout   NHWC 2.00x IREE default against NCHW 1.50x: NHWC kept"
    # the NCHW race's end, for the IREE race to try with a configuration's flags
    assert kept.other_layout == ({"conv1x1_to_matmul": {}},)
    recipe = yaml.safe_load((tmp_path / "m.channels_last.im2col.yaml").read_text())
    assert recipe["graph"] == [{"channels_last": {}}, {"conv1x1_to_matmul": {}}, {"im2col": {}}]
    # A re-run takes the steps up from the record, channels_last among them.
    again = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert len(raced) == 5 and again.steps == kept.steps
    assert again.workload.mlir == kept.workload.mlir and again.other_layout == kept.other_layout
    # The NCHW end result faster: NCHW is kept (NHWC needs the margin, 1.02x).
    (tmp_path / GRAPH_RACE_FILE).unlink()
    speedups["m.channels_last.im2col.yaml"] = 1.0
    plain = race_model_rewrites(workload, spec, tmp_path, x86, _graph_run(speedups, raced))
    assert plain.steps == ({"conv1x1_to_matmul": {}},) and plain.speedup == 1.5
    assert plain.lines[-1] == "layout   NHWC 1.20x IREE default against NCHW 1.50x: NCHW kept"
    assert plain.other_layout == ({"channels_last": {}}, {"conv1x1_to_matmul": {}})


SOFTMAX_MODEL = """
func.func @m(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %s = linalg.softmax {tdsched.layer = "attn"} dimension(1) ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}
"""


def test_a_softmax_is_raced_decomposed_on_the_whole_model_only(tmp_path: Path) -> None:
    from tdsched.targets.workload import workload_from_text

    workload = workload_from_text(SOFTMAX_MODEL, "m.mlir", "m", None)
    raced: list[str] = []
    x86 = make_target("x86")
    speedups: dict[str, float | list[float]] = {"m.decompose_softmax.yaml": 1.6}
    kept = race_model_rewrites(
        workload, {"file": "m.mlir"}, tmp_path, x86, _graph_run(speedups, raced)
    )
    assert raced == ["m.decompose_softmax.yaml"]  # the convolution rewrites change nothing
    assert kept.steps == ({"decompose_softmax": {}},) and kept.speedup == 1.6
    assert "linalg.softmax" not in kept.workload.mlir and "math.exp" in kept.workload.mlir
    (tmp_path / GRAPH_RACE_FILE).unlink()
    slower: dict[str, float | list[float]] = {"m.decompose_softmax.yaml": 0.7}
    none = race_model_rewrites(
        workload, {"file": "m.mlir"}, tmp_path, x86, _graph_run(slower, raced)
    )
    assert none.steps == () and raced[-1] == "m.decompose_softmax.yaml"
    assert len(none.lines) == 1 and none.lines[0].endswith("0.70x IREE default, not kept")


def test_tune_refuses_a_state_file_tdsched_did_not_write_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``[]`` was an AttributeError traceback, after the profile."""
    out = tmp_path / "cnn.tune"
    out.mkdir()
    (out / "tune-state.json").write_text("[]")
    assert main(["tune", "small_cnn", "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tdsched: error: {out / 'tune-state.json'}: not a tune state")
    assert sorted(p.name for p in out.iterdir()) == ["tune-state.json"]


def test_a_result_stored_into_part_of_its_binding_is_returned_padded_to_it() -> None:
    # IREE fused the next layer's zero pad into the store: the value goes into the
    # interior of a larger buffer. Returned bare, IREE would form another dispatch from it
    # (collapsing a 14x14 pixel nest into 196 rows); padded, it stores it so again.
    interior = (
        _dispatch()
        .replace("writeonly:tensor<8x4xf32>>", "readwrite:tensor<10x6xf32>>")
        .replace(
            "offsets = [0, 0], sizes = [8, 4], strides = [1, 1] : tensor<8x4xf32>",
            "offsets = [1, 2], sizes = [8, 4], strides = [1, 1] : tensor<8x4xf32>",
        )
    )
    text = standalone_function(interior, "t0")
    assert "-> tensor<10x6xf32>" in text
    assert "tensor.pad %3 low[1, 2] high[1, 0]" in text and "tensor.yield %cst" in text
    strided = interior.replace(
        "sizes = [8, 4], strides = [1, 1] : tensor<8x4xf32> ->",
        "sizes = [8, 4], strides = [1, 2] : tensor<8x4xf32> ->",
    )
    with pytest.raises(ScheduleError, match="at a dynamic offset or with a stride"):
        standalone_function(strided, "t0")
