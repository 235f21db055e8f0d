"""Graph rewrite mmt4d: a matmul becomes pack + ``linalg.mmt4d`` + unpack.

``linalg.matmul`` (M x K times K x N) with inner tile ``(M0, N0, K0)`` becomes::

    %lhs = linalg.pack %a  inner_tiles [M0, K0]             -> M1 x K1 x M0 x K0
    %rhs = linalg.pack %b  outer_dims_perm [1, 0]
                           inner_dims_pos [1, 0] [N0, K0]  -> N1 x K1 x N0 x K0
    %acc = linalg.pack %init inner_tiles [M0, N0]           -> M1 x N1 x M0 x N0
    %mm  = linalg.mmt4d ins(%lhs, %rhs) outs(%acc)
    %c   = linalg.unpack %mm into tensor.empty()            -> M x N

so every inner tile of both operands is contiguous (the layout IREE's data tiling and
its mmt4d microkernels use). A matmul that reads its right-hand side transposed (N x K,
indexing maps ``(m, k), (n, k), (m, n)``: a linear layer's ``[out, in]`` weight) is
packed the same way without the transpose: ``N x K`` tiles straight into
``N1 x K1 x N0 x K0``. ``linalg.batch_matmul`` becomes ``linalg.batch_mmt4d`` the
same way, with the batch dim kept outermost. Sizes that the tile does not divide are
zero-padded by the packs (a zero K slice adds nothing; padded rows and columns are
dropped by the unpack).

The packing is done by upstream transform ops (``structured.pack``, then
``structured.pack_transpose`` of the right-hand side), run in place. The packed
``linalg.generic`` is then replaced by the named op built with the bindings, after
checking its indexing maps: ``structured.specialize`` is not used, because it emits an
invalid ``linalg.mmt4d`` for some transposes and a ``linalg.contract`` for the batched
case. On Vulkan, pack and unpack dispatches do not compile: ``lower_packs`` lowers them
to ``tensor.pad`` + ``tensor.expand_shape`` + ``linalg.transpose`` (and back).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import NoReturn

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor, transform
from iree.compiler.dialects.transform import structured

from ..dispatch_region import group_ops
from ..generic_build import iterator_kinds, operands, simple_results
from ..interpreter import apply_in_place
from ..match import OpCriteria
from ..payload import ops_under
from ..script import TransformScript, any_op
from .report import GraphRewriteError, RewriteReport, describe_op, selected

PRIMITIVE = "mmt4d"
MATMUL = "linalg.matmul"
BATCH_MATMUL = "linalg.batch_matmul"
_TAG = "tdsched.mmt4d"
_TRANSPOSE = "linalg.transpose"
_ENTRY = "__mmt4d"


@dataclass(frozen=True)
class Mmt4dOptions:
    """The inner tile ``(M0, N0, K0)``, which ops to rewrite, and whether to lower packs.

    ``ops`` selects by op name and attributes (``None``: every ``linalg.matmul`` and
    ``linalg.batch_matmul``); ``lower_packs`` turns the packs and unpacks into
    pad/reshape/transpose ops, which Vulkan needs.
    """

    tile: tuple[int, int, int]
    ops: OpCriteria | None = None
    lower_packs: bool = False
    fuse_unpack: bool = False
    """Put each mmt4d in one dispatch with the fill of its accumulator, its unpack and the
    elementwise ops that consume only the unpack, in a chain (as IREE's data tiling
    does); needs unlowered packs."""


@dataclass(frozen=True)
class _Layout:
    """How one kind of matmul is packed and which named op the packed generic becomes.

    Loop order of the matmul: ``[B,] M, N, K``; of the packed op: ``[B,] M1, N1, K1, M0,
    N0, K0``. ``rhs_outer_perm`` swaps the RHS's outer dims to ``[B,] N1, K1``.
    """

    packed_name: str
    build: Callable[..., ir.Value]
    batch: bool

    @property
    def rank(self) -> int:
        return 3 + self.batch

    @property
    def rhs_outer_perm(self) -> list[int]:
        return [0, 2, 1] if self.batch else [1, 0]

    def packed_sizes(self, tile: tuple[int, int, int]) -> list[int]:
        return [0, *tile] if self.batch else list(tile)

    def matmul_maps(self, rhs_transposed: bool = False) -> list[ir.AffineMap]:
        """``[B,] M, K`` x ``[B,] K, N`` (or ``[B,] N, K`` when ``rhs_transposed``) ->
        ``[B,] M, N`` over loops ``[B,] M, N, K``."""
        b, m, n, k = self._loops(1)
        rhs = [*b, n, k] if rhs_transposed else [*b, k, n]
        return _maps(self.rank, [[*b, m, k], rhs, [*b, m, n]])

    def packed_maps(self) -> list[ir.AffineMap]:
        """The maps of ``linalg.mmt4d`` / ``linalg.batch_mmt4d``."""
        b, m1, n1, k1 = self._loops(1)
        _, m0, n0, k0 = self._loops(4)
        lhs, rhs, out = [*b, m1, k1, m0, k0], [*b, n1, k1, n0, k0], [*b, m1, n1, m0, n0]
        return _maps(self.rank + 3, [lhs, rhs, out])

    def _loops(self, first: int) -> tuple[list[int], int, int, int]:
        """Loop positions ``([B], M, N, K)`` of the group starting at ``first`` (+batch)."""
        start = first + self.batch - 1
        return [0][: self.batch], start, start + 1, start + 2


_LAYOUTS = {
    MATMUL: _Layout("linalg.mmt4d", linalg.mmt4d, batch=False),
    BATCH_MATMUL: _Layout("linalg.batch_mmt4d", linalg.batch_mmt4d, batch=True),
}


def _maps(num_dims: int, results: list[list[int]]) -> list[ir.AffineMap]:
    return [
        ir.AffineMap.get(num_dims, 0, [ir.AffineDimExpr.get(d) for d in dims]) for dims in results
    ]


def _indexing_maps(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


@dataclass(frozen=True)
class _Candidate:
    """A selected op that can be rewritten: its layout, loop sizes ``[B,] M, N, K`` and
    whether it reads its right-hand side transposed (``[B,] N, K``)."""

    op: ir.Operation
    layout: _Layout
    sizes: tuple[int, ...]
    rhs_transposed: bool = False


def mmt4d(module: ir.Module, options: Mmt4dOptions) -> RewriteReport:
    """Rewrite every selected matmul / batch matmul of ``module`` into the mmt4d form.

    Preconditions (checked on every selected op before anything is rewritten, else
    :class:`GraphRewriteError` naming the op): three positive tile sizes; tensor
    operands of static shape; the default indexing maps or those reading the right-hand
    side transposed (no other variant) and signed casts.
    """
    _check_tile(options.tile)
    _check_criteria(options.ops)
    if options.fuse_unpack and options.lower_packs:
        raise GraphRewriteError(
            f"{PRIMITIVE}: fuse_unpack needs the packs as they are, but lower_packs lowers "
            "them (as Vulkan needs); set fuse_unpack: false or lower_packs: false"
        )
    candidates = [_candidate(op) for op in _selected_ops(module, options.ops)]
    if not candidates:
        return RewriteReport(PRIMITIVE, _nothing_selected(options.ops), changed=False)
    # Read everything about the selected ops now: packing erases them.
    details = tuple(_describe(c, options.tile) for c in candidates)
    summary = _summary(candidates, options)
    for rhs_transposed in (False, True):  # the transposed ones' packs need no transpose
        group = [c for c in candidates if c.rhs_transposed == rhs_transposed]
        for candidate in group:
            _tag(candidate.op)
        if group:
            _run(module, _pack_script(options.tile, rhs_transposed), "packing")
    named = [_replace_with_named(generic) for generic in _tagged_ops(module)]
    for op in named:
        _unpack_into_empty(op)
        _fill_packed_init(op)
        if options.lower_packs:
            _tag_packs(op)
    _run(module, _finish_script(options.lower_packs), "lowering the packs")
    if options.fuse_unpack:
        summary += "; " + _grouping_note([_one_dispatch(op) for op in named])
    for op in named:
        del op.attributes[_TAG]
    return RewriteReport(PRIMITIVE, summary, changed=True, details=details)


def _check_tile(tile: tuple[int, ...]) -> None:
    if len(tile) != 3 or not all(isinstance(s, int) and s > 0 for s in tile):
        raise GraphRewriteError(
            f"{PRIMITIVE}: tile must be three positive sizes (M0, N0, K0), got {list(tile)}"
        )


def _check_criteria(criteria: OpCriteria | None) -> None:
    if criteria is not None and criteria.op is not None and criteria.op not in _LAYOUTS:
        raise GraphRewriteError(
            f"{PRIMITIVE}: rewrites {MATMUL} and {BATCH_MATMUL} only; 'ops' selects "
            f"{criteria.op!r} (generalized matmuls are not recognised: keep them named)"
        )


def _selected_ops(module: ir.Module, criteria: OpCriteria | None) -> list[ir.Operation]:
    return ops_under(module.operation, lambda op: op.name in _LAYOUTS and selected(op, criteria))


def _candidate(op: ir.Operation) -> _Candidate:
    """``op`` with its layout and sizes, or :class:`GraphRewriteError` saying why not."""
    layout = _LAYOUTS[op.name]
    types = [v.type for v in op.operands]
    if len(op.results) != 1 or not all(isinstance(t, ir.RankedTensorType) for t in types):
        _refuse(op, "works on tensors; bufferized (memref) matmuls cannot be packed")
    shapes = [ir.RankedTensorType(t) for t in types]
    if not all(s.has_static_shape for s in shapes):
        shown = ", ".join(str(s) for s in shapes)
        _refuse(op, f"needs static sizes, got {shown}; make the shapes static first")
    maps = _indexing_maps(op)
    rhs_transposed = maps == layout.matmul_maps(rhs_transposed=True)
    if maps != layout.matmul_maps() and not rhs_transposed:
        _refuse(
            op,
            "has indexing maps other than the default and the right-hand side transposed "
            "(a transposed left-hand side or a broadcast variant)",
        )
    if "cast" in op.attributes and "unsigned" in str(op.attributes["cast"]):
        _refuse(op, "uses unsigned casts, which linalg.mmt4d cannot express")
    lhs, rhs = shapes[0].shape, shapes[1].shape
    n = rhs[-2] if rhs_transposed else rhs[-1]
    return _Candidate(op, layout, (*lhs[:-1], n, lhs[-1]), rhs_transposed)


def _refuse(op: ir.Operation, why: str) -> NoReturn:
    raise GraphRewriteError(f"{PRIMITIVE}: cannot rewrite {describe_op(op)}: it {why}")


def _nothing_selected(criteria: OpCriteria | None) -> str:
    which = "" if criteria is None else f" selected by ({criteria.describe()})"
    return f"changed nothing: no {MATMUL} or {BATCH_MATMUL}{which}"


def _run(module: ir.Module, script: str, what: str) -> None:
    try:
        apply_in_place(module, script, _ENTRY)
    except ir.MLIRError as exc:
        raise GraphRewriteError(f"{PRIMITIVE}: {what} failed: {exc}") from exc


def _foreach_tagged(bodies: dict[str, Callable[[ir.Value], None]]) -> str:
    """``@__mmt4d``: for each op name, run its body once per tagged op of that name.

    One ``transform.foreach`` per name, as the transform ops used take one op at a time;
    handles are typed ``!transform.op<"name">``, which the pack lowerings require.
    """
    script = TransformScript(ir.Context.current)
    seq = script.named_sequence(_ENTRY, arg_effect="consumed")
    with seq.building():
        tag = ir.DictAttr.get({_TAG: ir.UnitAttr.get()})
        for name, body in bodies.items():
            (op_type,) = _op_types(name)
            ops = structured.MatchOp(op_type, seq.argument, ops=[name], op_attrs=tag).result
            loop = transform.ForeachOp([], [ops])
            with ir.InsertionPoint(loop.body):
                body(loop.body.arguments[0])
                transform.YieldOp([])
    seq.finish()
    return script.text()


def _pack_script(tile: tuple[int, int, int], rhs_transposed: bool) -> str:
    """Pack each tagged matmul; the packed ``linalg.generic`` is tagged in its place.
    The tagged matmuls are all of one kind: ``rhs_transposed`` or not."""
    return _foreach_tagged(
        {
            name: partial(
                _pack, sizes=layout.packed_sizes(tile), layout=layout, transposed=rhs_transposed
            )
            for name, layout in _LAYOUTS.items()
        }
    )


def _pack(op: ir.Value, sizes: list[int], layout: _Layout, transposed: bool) -> None:
    """Pack the matmul ``op`` by ``sizes``, the RHS's outer dims ``[B,] N1 x K1``: a
    ``[B,] K x N`` RHS packs as ``[B,] K1 x N1`` and is transposed; a ``transposed`` one
    (``[B,] N x K``) packs so already."""
    packed = structured.PackOp(any_op(), op, [], static_packed_sizes=sizes).packed_op
    if not transposed:
        rhs_pack = transform.GetProducerOfOperand(any_op(), packed, 1).producer
        packed = structured.PackTransposeOp(
            any_op(), any_op(), any_op(), rhs_pack, packed, outer_perm=layout.rhs_outer_perm
        ).packed_op
    transform.AnnotateOp(packed, _TAG)


def _finish_script(lower_packs: bool) -> str:
    """Lower the tagged packs and unpacks (if asked), then DCE the rewritten functions.

    DCE removes what the packing left dead (the pack transpose's first destination, a
    folded pack of a fill), and any other unused side-effect-free op in those functions.
    """
    lower: dict[str, Callable[[ir.Value], None]] = {
        "linalg.pack": _lower_pack,
        "linalg.unpack": _lower_unpack,
    }
    bodies = lower if lower_packs else {}
    return _foreach_tagged({**bodies, **{lay.packed_name: _dce for lay in _LAYOUTS.values()}})


def _lower_pack(pack: ir.Value) -> None:
    structured.LowerPackOp(*_op_types("tensor.pad", "tensor.expand_shape", _TRANSPOSE), pack)


def _lower_unpack(unpack: ir.Value) -> None:
    types = _op_types(
        "tensor.empty", _TRANSPOSE, "tensor.collapse_shape", "tensor.extract_slice", "linalg.copy"
    )
    structured.LowerUnPackOp(*types, unpack)


def _dce(named: ir.Value) -> None:
    function = transform.GetParentOp(any_op(), named, op_name="func.func").result
    transform.ApplyDeadCodeEliminationOp(function)


def _op_types(*names: str) -> list[ir.Type]:
    """``!transform.op<"name">`` for each name (the lowering ops require typed handles)."""
    return [transform.OperationType.get(name) for name in names]


def _tagged_ops(module: ir.Module) -> list[ir.Operation]:
    return ops_under(module.operation, lambda op: _TAG in op.attributes)


def _replace_with_named(generic: ir.Operation) -> ir.Operation:
    """Replace the packed ``generic`` by the named op with the same maps (checked).

    The named op is tagged in its place, for the steps that follow.
    """
    maps = _indexing_maps(generic)
    layout = next((lay for lay in _LAYOUTS.values() if lay.packed_maps() == maps), None)
    if layout is None:
        raise GraphRewriteError(
            f"{PRIMITIVE}: packing {describe_op(generic)} gave indexing maps {maps}, "
            "which are not those of linalg.mmt4d or linalg.batch_mmt4d (a tdsched bug)"
        )
    lhs, rhs, init = generic.operands
    with ir.InsertionPoint(generic), generic.location:
        named = layout.build(lhs, rhs, outs=[init]).owner
    _tag(named)
    generic.results[0].replace_all_uses_with(named.results[0])
    generic.erase()
    return named


def _unpack_into_empty(named: ir.Operation) -> None:
    """Give the unpack of ``named``'s result a fresh ``tensor.empty`` destination.

    An unpack overwrites all of its destination, so this changes no value; but IREE
    3.13 on x86 cannot compile an unpack dispatch whose destination is a function
    argument (the matmul accumulating into an argument): "write affecting operations on
    global resources are restricted to workgroup distributed contexts".
    """
    (unpack,) = (use.owner for use in named.results[0].uses)
    dest = unpack.operands[1]
    if not isinstance(dest.owner, ir.Block) and dest.owner.name == "tensor.empty":
        return
    dest_type = ir.RankedTensorType(dest.type)
    with ir.InsertionPoint(unpack), unpack.location:
        empty = tensor.EmptyOp(dest_type.shape, dest_type.element_type).result
    unpack.operands[1] = empty


def _fill_packed_init(named: ir.Operation) -> None:
    """Fill the packed accumulator directly when the pack's source is a ``linalg.fill``.

    (A padded pack then holds the fill value in its padding instead of zero, which the
    unpack drops.) IREE folds this itself on x86; doing it here keeps a lowered pack of
    the fill (pad, reshape, transpose) off Vulkan, and leaves the dispatch's fill with
    the 4-d loop count that kernel schedules see.
    """
    pack = named.operands[2].owner
    fill = pack.operands[0].owner
    if isinstance(fill, ir.Block) or fill.name != "linalg.fill":
        return
    with ir.InsertionPoint(pack), pack.location:
        packed = linalg.fill(fill.operands[0], outs=[pack.operands[1]])
    pack.results[0].replace_all_uses_with(packed)
    pack.erase()


def _one_dispatch(named: ir.Operation) -> int | None:
    """Group ``named`` with the fill of its accumulator, its unpack and the chain of
    elementwise ops after it into one ``flow.dispatch.region`` (see
    :attr:`Mmt4dOptions.fuse_unpack`); returns how many elementwise ops it took, or
    ``None`` where ``named`` already sits in a region (left as it is).

    IREE's dispatch formation puts a packed op's unpack in a dispatch of its own (with
    its elementwise consumers), which costs a pass over the result; data tiling, whose
    packs IREE forms itself, computes the unpack inside the matmul's dispatch.
    """
    parent = named.parent
    if parent is None or parent.name != "func.func":
        return None
    members = [named]
    init = named.operands[2].owner
    is_fill = not isinstance(init, ir.Block) and init.name == "linalg.fill"
    if is_fill and _only_user(init.results[0]) == named:
        members.insert(0, init.operation)
    (unpack,) = (use.owner.operation for use in named.results[0].uses)
    members.append(unpack)
    consumer = _elementwise_consumer(unpack)
    while consumer is not None:
        members.append(consumer)
        consumer = _elementwise_consumer(consumer)
    group_ops(members)
    return len(members) - members.index(unpack) - 1


def _only_user(value: ir.Value) -> ir.Operation | None:
    """The one op that uses ``value`` (once or more), or ``None``."""
    users = {use.owner.operation for use in value.uses}
    return users.pop() if len(users) == 1 else None


def _elementwise_consumer(op: ir.Operation) -> ir.Operation | None:
    """The only user of ``op``'s one result, if it is an all-parallel ``linalg.generic``
    in the same block with one result, reading that result and writing its own through
    identity maps (so IREE tiles it with the op's tiles)."""
    if len(op.results) != 1:
        return None
    value = op.results[0]
    user = _only_user(value)
    if user is None or user.name != "linalg.generic" or user.parent != op.parent:
        return None
    kinds = iterator_kinds(user)
    identity = tuple(range(len(kinds)))
    inputs, outputs = operands(user)
    return (
        user
        if len(user.results) == 1
        and all(kind == "parallel" for kind in kinds)
        and all(simple_results(o.map) == identity for o in outputs)
        and all(simple_results(o.map) == identity for o in inputs if o.value == value)
        else None
    )


def _grouping_note(consumers: list[int | None]) -> str:
    """``each in one dispatch with its unpack (2 elementwise op(s) fused after it)``, and
    how many were left in the region they were already in."""
    grouped = [n for n in consumers if n is not None]
    note = "each in one dispatch with its unpack"
    if sum(grouped):
        note += f" ({sum(grouped)} elementwise op(s) fused after it)"
    if len(grouped) < len(consumers):
        note += f"; {len(consumers) - len(grouped)} already in a dispatch region, left there"
    return note


def _tag_packs(named: ir.Operation) -> None:
    """Tag the packs feeding ``named`` and the unpack of its result, for lowering."""
    for value in named.operands:
        if not isinstance(value.owner, ir.Block) and value.owner.name == "linalg.pack":
            _tag(value.owner)
    for use in named.results[0].uses:
        _tag(use.owner)


def _tag(op: ir.Operation | ir.OpView) -> None:
    op.attributes[_TAG] = ir.UnitAttr.get()


def _describe(candidate: _Candidate, tile: tuple[int, int, int]) -> str:
    """``linalg.matmul at loc: 100x50x30 -> linalg.mmt4d 7x4x8 tiles of 16x16x4 (...)``."""
    sizes = candidate.sizes
    batch, mnk = sizes[: candidate.layout.batch], sizes[candidate.layout.batch :]
    outer = [*batch, *(-(-size // t) for size, t in zip(mnk, tile, strict=True))]
    line = (
        f"{describe_op(candidate.op)}: {_dims(sizes)} -> {candidate.layout.packed_name} "
        f"{_dims(outer)} tiles of {_dims(tile)}"
    )
    if _padded(candidate, tile):
        padded = [o * t for o, t in zip(outer[len(batch) :], tile, strict=True)]
        line += f" (zero-padded to {_dims([*batch, *padded])})"
    return line


def _padded(candidate: _Candidate, tile: tuple[int, int, int]) -> bool:
    mnk = candidate.sizes[candidate.layout.batch :]
    return any(size % t for size, t in zip(mnk, tile, strict=True))


def _dims(sizes: tuple[int, ...] | list[int]) -> str:
    return "x".join(str(s) for s in sizes)


def _summary(candidates: list[_Candidate], options: Mmt4dOptions) -> str:
    """``rewrote 1 linalg.matmul into pack + linalg.mmt4d + unpack (tile 16x16x1)``."""
    counts = Counter(c.op.name for c in candidates)
    rewrote = ", ".join(f"{n} {name}" for name, n in counts.items())
    packed = " / ".join(_LAYOUTS[name].packed_name for name in counts)
    notes = [f"tile {_dims(options.tile)}"]
    padded = sum(_padded(c, options.tile) for c in candidates)
    if padded:
        notes.append(f"{padded} zero-padded")
    if options.lower_packs:
        notes.append("packs lowered to pad + expand_shape + transpose")
    return f"rewrote {rewrote} into pack + {packed} + unpack ({'; '.join(notes)})"
