"""The per-target end of an IREE kernel strategy, after the user's schedule steps.

A transform-dialect codegen strategy replaces IREE's whole pipeline for its dispatch, so
after tiling/fusion/vectorization it must bufferize, distribute foralls to workgroups
(and threads on GPUs), lower vectors and mark the function as fully lowered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import loop, structured
from iree.compiler.dialects.transform import vector as tvector

from .cleanup import apply_patterns, cleanup
from .script import OpHandle, any_op, create_op


def distribute_to_workgroups(forall: ir.Value) -> None:
    """Make IREE's workgroup count follow the forall's trip counts."""
    create_op("transform.iree.populate_workgroup_count_region_using_num_threads_slice", [forall])


def hoist_loop_invariant_subsets(func: OpHandle) -> None:
    """Hoist accumulator slices (read/write pairs) out of every ``scf.for`` under ``func``."""
    loops = structured.MatchOp(any_op(), func.value, ops=["scf.for"]).result
    block = transform.ForeachOp([], [loops]).body
    with ir.InsertionPoint(block):
        loop.HoistLoopInvariantSubsetsOp(block.arguments[0])
        transform.YieldOp([])


def _bufferize(func: OpHandle, *, gpu: bool) -> OpHandle:
    create_op("transform.iree.eliminate_empty_tensors", [func.value])
    attrs = {"target_gpu": ir.UnitAttr.get()} if gpu else {}
    result = create_op("transform.iree.bufferize", [func.value], 1, attrs).result
    return OpHandle(structured.MatchOp(any_op(), result, ops=["func.func"]).result, "func.func")


def _lower_vectors(func: OpHandle, *, contraction: str) -> None:
    """Vector lowering, one pattern set per region (many in one region can hang IREE).

    A vectorized reduction that is not a contraction (a row sum: ``vector.multi_reduction``)
    is lowered too, to elementwise ops across the reduced vectors (``InnerParallel``);
    IREE's LLVM conversion does not lower it, and the build would fail there."""
    strategy = tvector.VectorContractLowering[contraction]
    rows = tvector.VectorMultiReductionLowering.InnerParallel
    stages: Sequence[Callable[[], object]] = (
        lambda: tvector.ApplyLowerContractionPatternsOp(lowering_strategy=strategy),
        lambda: tvector.ApplyReorderMultiReductionPatternsOp(lowering_strategy=rows),
        lambda: tvector.ApplyMultiReductionFlatteningPatternsOp(lowering_strategy=rows),
        lambda: tvector.ApplyMultiReductionUnrollingPatternsOp(lowering_strategy=rows),
        tvector.ApplyLowerOuterProductPatternsOp,
        tvector.ApplyTransferPermutationPatternsOp,
        lambda: tvector.ApplyLowerTransferPatternsOp(max_transfer_rank=1),
        tvector.ApplyLowerBroadcastPatternsOp,
        tvector.ApplyLowerShapeCastPatternsOp,
    )
    for make in stages:
        op = transform.ApplyPatternsOp(func.value)
        with ir.InsertionPoint(op.patterns):
            make()


def _mark_lowered(func: OpHandle) -> None:
    info = ir.Attribute.parse(
        "#iree_codegen.translation_info<pipeline = #iree_codegen.no_pipeline>"
    )
    param = transform.ParamConstantOp(transform.AnyParamType.get(), info).param
    transform.AnnotateOp(func.value, "translation_info", param=param)


def cpu_tail(func: OpHandle, *, contraction: str = "OuterProduct") -> None:
    """Finish a llvm-cpu strategy: hoist, bufferize, map foralls to workgroups, lower vectors."""
    cleanup(func, licm=False)
    hoist_loop_invariant_subsets(func)
    cleanup(func, licm=False)
    bufferized = _bufferize(func, gpu=False)
    create_op("transform.iree.forall_to_workgroup", [bufferized.value])
    cleanup(bufferized, licm=False)
    hoisted = OpHandle(
        structured.HoistRedundantVectorTransfersOp(any_op(), bufferized.value).transformed,
        "func.func",
    )
    cleanup(hoisted, licm=False)
    # Forward the hoisted accumulator through registers; removes the leftover stack tile.
    hoisted = hoisted.rebound(
        transform.ApplyRegisteredPassOp(
            any_op(), hoisted.value, "iree-codegen-optimize-vector-transfer"
        ).result
    )
    _lower_vectors(hoisted, contraction=contraction)
    apply_patterns(hoisted, "transform.apply_patterns.canonicalization", cse=True)
    _mark_lowered(hoisted)


def gpu_tail(func: OpHandle, workgroup_size: Sequence[int]) -> None:
    """Finish a vulkan-spirv strategy: bufferize for GPU, map foralls to workgroups/threads.

    IREE's SPIR-V vector unrolling and accumulator hoisting must run on tensors, before
    bufferization (afterwards the loop-carried 2-D vectors never get split), so its
    passes run here through ``apply_registered_pass``; IREE lowers the remaining vector
    ops itself after the strategy. ``workgroup_size`` must match the thread forall
    (threads per dim, x first); lavapipe and most GPUs need ``subgroup_size = 0`` (any).
    """
    cleanup(func, licm=False)
    for name in (
        "iree-spirv-initial-vector-lowering",
        "iree-codegen-optimize-tensor-insert-extract-slices",
        "iree-codegen-canonicalize-scf-for",
    ):
        func = func.rebound(transform.ApplyRegisteredPassOp(any_op(), func.value, name).result)
    cleanup(func, licm=False)
    bufferized = _bufferize(func, gpu=True)
    # Canonicalize twice: the first pass exposes the forall self-copies the second removes.
    cleanup(bufferized, licm=False)
    cleanup(bufferized, licm=False)
    create_op("transform.iree.forall_to_workgroup", [bufferized.value])
    dims = ir.DenseI64ArrayAttr.get(list(workgroup_size))
    create_op(
        "transform.iree.map_nested_forall_to_gpu_threads",
        [bufferized.value],
        0,
        {
            "workgroup_dims": dims,
            "subgroup_size": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0),
        },
    )
    cleanup(bufferized, licm=False)
    create_op("transform.iree.apply_licm", [bufferized.value])
    transform.ApplyCommonSubexpressionEliminationOp(bufferized.value)
