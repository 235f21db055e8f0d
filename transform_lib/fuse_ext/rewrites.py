"""IR rewrites fuse_ext needs between transform steps, which no transform op offers.

Each works on the payload in place (MLIR Python bindings) and keeps tensor semantics:

* :func:`union_slices`: when a shared producer is read through several different slices
  inside the loop body (e.g. a 3x3 conv's halo and an elementwise op's exact tile), they
  become sub-slices of one slice covering their union, so the producer is tiled once;
* :func:`bubble_slices_through_reshape`: a slice the loop body takes of an
  ``expand_shape``/``collapse_shape`` result becomes the reshape of a slice of its source,
  when the slice is contiguous in the source; the reshape's producer can then be fused;
* :func:`forall_to_for`: an ``scf.forall`` becomes an ``scf.for`` nest in a chosen order;
  each ``parallel_insert_slice`` becomes an ``insert_slice`` into the loop-carried
  tensor it names (paired by destination, never by position).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import reduce

from iree.compiler import ir
from iree.compiler.dialects import arith, scf, tensor

from .plan import FID, LOOP_ROLE, FuseExtError

_DYNAMIC = ir.ShapedType.get_dynamic_size()


def _index_constant(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _constant(value: ir.Value) -> int | ir.Value:
    """``value`` as an int when it is an ``arith.constant`` (tiling leaves many), else itself."""
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "arith.constant":
        return int(ir.IntegerAttr(owner.operation.attributes["value"]).value)
    return value


def _mixed(static: ir.Attribute, dynamic: Sequence[ir.Value]) -> list[int | ir.Value]:
    """Static entries (and constant dynamic ones) as ints, others as SSA values."""
    values = iter(dynamic)
    return [_constant(next(values)) if v == _DYNAMIC else v for v in ir.DenseI64ArrayAttr(static)]


def _as_value(entry: int | ir.Value) -> ir.Value:
    return _index_constant(entry) if isinstance(entry, int) else entry


def _slice_parts(op: ir.Operation) -> tuple[list[int | ir.Value], list[int | ir.Value]]:
    view = op.opview
    offsets = _mixed(op.attributes["static_offsets"], list(view.offsets))
    sizes = _mixed(op.attributes["static_sizes"], list(view.sizes))
    return offsets, sizes


def _same_slice(a: ir.Operation, b: ir.Operation) -> bool:
    return (
        all(
            str(a.attributes[k]) == str(b.attributes[k])
            for k in ("static_offsets", "static_sizes", "static_strides")
        )
        and list(a.operands)[1:] == list(b.operands)[1:]
    )


def _unit_strides(op: ir.Operation) -> bool:
    return all(s == 1 for s in ir.DenseI64ArrayAttr(op.attributes["static_strides"]))


def _defined_before(value: ir.Value, anchor: ir.Operation) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return True
    op = owner.operation
    if op.parent != anchor.parent:
        return True
    return bool(op == anchor or op.is_before_in_block(anchor))


def union_slices(loop: ir.Operation, producer: ir.Operation) -> bool:
    """Make every slice of ``producer`` read in ``loop``'s body a sub-slice of their union.

    Applies per result when it is read through two or more different full-rank, unit-stride
    ``tensor.extract_slice`` ops in the body; returns whether anything changed.
    """
    body = loop.regions[0].blocks[0]
    changed = False
    for result in producer.results:
        slices: list[ir.Operation] = []
        for use in result.uses:
            user = use.owner.operation
            if (
                user.name == "tensor.extract_slice"
                and user.parent == loop
                and not any(_same_slice(user, s) for s in slices)
            ):
                slices.append(user)
        if len(slices) < 2 or not all(_unit_strides(s) for s in slices):
            continue
        if any(
            ir.RankedTensorType(s.result.type).rank != ir.RankedTensorType(result.type).rank
            for s in slices
        ):
            continue
        anchor = _first_use(body, slices)
        operands = [v for s in slices for v in list(s.operands)[1:]]
        if anchor is None or not all(_defined_before(v, anchor) for v in operands):
            continue
        with ir.InsertionPoint(anchor):
            _rewrite_as_union(result, slices)
        changed = True
    return changed


def _first_use(body: ir.Block, slices: Sequence[ir.Operation]) -> ir.Operation | None:
    """The first op in ``body`` that reads one of ``slices`` (where the union must exist)."""
    for op in body.operations:
        if any(_owner_is(v, slices) for v in op.operation.operands):
            return op.operation
    return None


def _owner_is(value: ir.Value, ops: Sequence[ir.Operation]) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return False
    return any(owner.operation == op for op in ops)


def _rewrite_as_union(result: ir.Value, slices: Sequence[ir.Operation]) -> None:
    parts = [_slice_parts(s) for s in slices]
    rank = len(parts[0][0])
    offsets = [[_as_value(p[0][d]) for p in parts] for d in range(rank)]
    ends = [
        [arith.AddIOp(_as_value(p[0][d]), _as_value(p[1][d])).result for p in parts]
        for d in range(rank)
    ]
    low = [reduce(lambda a, b: arith.MinSIOp(a, b).result, offs) for offs in offsets]
    high = [reduce(lambda a, b: arith.MaxSIOp(a, b).result, e) for e in ends]
    size = [arith.SubIOp(h, lo).result for h, lo in zip(high, low, strict=True)]
    element = ir.RankedTensorType(result.type).element_type
    union_type = ir.RankedTensorType.get([_DYNAMIC] * rank, element)
    union = tensor.ExtractSliceOp(
        union_type, result, low, size, [], [_DYNAMIC] * rank, [_DYNAMIC] * rank, [1] * rank
    ).result
    for s, (offs, _) in zip(slices, parts, strict=True):
        relative = [arith.SubIOp(_as_value(o), lo).result for o, lo in zip(offs, low, strict=True)]
        view = s.opview
        sub = tensor.ExtractSliceOp(
            s.result.type,
            union,
            relative,
            list(view.sizes),
            [],
            [_DYNAMIC] * rank,
            s.attributes["static_sizes"],
            [1] * rank,
        )
        s.result.replace_all_uses_with(sub.result)
        s.erase()


def _reassociation(op: ir.Operation) -> list[list[int]]:
    return [
        [int(ir.IntegerAttr(d).value) for d in ir.ArrayAttr(g)]
        for g in ir.ArrayAttr(op.attributes["reassociation"])
    ]


def _multiple_of(entry: int | ir.Value, factor: int) -> bool:
    """Whether a slice offset is provably a multiple of ``factor``."""
    if factor == 1:
        return True
    if isinstance(entry, int):
        return entry % factor == 0
    owner = entry.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "affine.apply":
        return False
    expr = ir.AffineMapAttr(owner.operation.attributes["map"]).value.results[0]
    return (
        isinstance(expr, ir.AffineMulExpr)
        and isinstance(expr.rhs, ir.AffineConstantExpr)
        and expr.rhs.value % factor == 0
    )


def _scaled(entry: int | ir.Value, factor: int) -> int | ir.Value:
    if isinstance(entry, int):
        return entry * factor
    if factor == 1:
        return entry
    return arith.MulIOp(entry, _index_constant(factor)).result


def _source_slice(
    reshape: ir.Operation, offsets: list[int | ir.Value], sizes: list[int | ir.Value]
) -> tuple[list[int | ir.Value], list[int]] | str:
    """The source slice equal to a slice of ``reshape``'s result, if it is contiguous in
    the source; else why not (words that follow "the loop's slice of it").

    Sizes must be static. An expand_shape group (result dims split from one source dim,
    row-major) is contiguous when the slice is 1 wide along the group's leading dims, cut
    along one dim, and whole along the dims after it (a 1x1xN tile of 16x16x1024 starts
    at d0*16384 + d1*1024 + d2). A collapse_shape group may be cut only along its
    outermost source dim, the inner ones taken whole.
    """
    groups = _reassociation(reshape)
    expand = reshape.name == "tensor.expand_shape"
    big = ir.RankedTensorType((reshape.result if expand else reshape.operands[0]).type).shape
    src_offsets: list[int | ir.Value] = []
    src_sizes: list[int] = []
    if any(not isinstance(z, int) for z in sizes):
        return _dynamic_sizes(ir.RankedTensorType(reshape.result.type).shape, sizes)
    for g, group in enumerate(groups):
        inner = 1
        for d in group[1:]:
            inner *= big[d]
        if expand:
            found = _expanded_group_slice(group, big, offsets, [int(z) for z in sizes])
            if isinstance(found, str):
                return found
            src_offsets.append(found[0])
            src_sizes.append(found[1])
        else:
            # result dim g is source dims `group` collapsed: cut only the outermost
            off, size = offsets[g], int(sizes[g])
            if size % inner or not _multiple_of(off, inner):
                return (
                    f"is not contiguous in its source: its slice of result dim {g} (size "
                    f"{size}) does not cover whole rows of "
                    f"the {inner} elements its source dims {list(group[1:])} hold"
                )
            for d in group:
                if d == group[0]:
                    src_offsets.append(_divided(off, inner))
                    src_sizes.append(size // inner)
                else:
                    src_offsets.append(0)
                    src_sizes.append(big[d])
    return src_offsets, src_sizes


def _dynamic_sizes(shape: Sequence[int], sizes: Sequence[int | ir.Value]) -> str:
    """Why slice ``sizes`` of a reshape's result (static ``shape``) are not all static: a
    tile size that does not divide a dim gives a partial last tile, whose size tiling
    computes as ``affine.min`` of the nominal size and what is left."""
    partial = []
    for d, size in enumerate(sizes):
        if isinstance(size, int):
            continue
        tile = _nominal_tile(size)
        if tile is None or shape[d] == _DYNAMIC:
            return (
                f"has a dynamic size along result dim {d}; a reshape is passed only with "
                "static slice sizes"
            )
        partial.append(f"tiles of {tile} do not divide result dim {d} ({shape[d]})")
    return (
        f"has a partial last tile: {', '.join(partial)}, so the slice's size is dynamic "
        "there, and a reshape is passed only with static slice sizes; "
        "tile sizes that divide the reshaped dims keep the slices static"
    )


def _nominal_tile(size: ir.Value) -> int | None:
    """The nominal size of a partial tile's size ``affine.min(nominal, what is left)``."""
    owner = size.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "affine.min":
        return None
    results = ir.AffineMapAttr(owner.operation.attributes["map"]).value.results
    constants = [e.value for e in results if isinstance(e, ir.AffineConstantExpr)]
    return max(constants, default=None)


def _expanded_group_slice(
    group: Sequence[int], big: Sequence[int], offsets: list[int | ir.Value], sizes: list[int]
) -> tuple[int | ir.Value, int] | str:
    """The (offset, size) in source dim ``g`` of a slice of the result dims ``group`` that
    an expand_shape split it into, or why the slice is not contiguous there (as
    :func:`_source_slice` words it)."""
    cut = next((i for i, d in enumerate(group) if sizes[d] != 1), len(group) - 1)
    partial = [d for d in group[cut + 1 :] if sizes[d] != big[d]]
    if partial:
        return (
            f"is not contiguous in its source: its slice {[sizes[d] for d in group]} of "
            f"result dims {list(group)} (shape "
            f"{[big[d] for d in group]}, split from one source dim) is cut along dim "
            f"{group[cut]} and also along dim {partial[0]}; a contiguous slice is 1 wide "
            "along the group's leading dims, cut along one dim, and whole along the dims "
            "after it"
        )
    offset: int | ir.Value = 0
    stride = 1
    for d in reversed(group):
        if sizes[d] != big[d]:  # a whole dim starts at 0
            offset = _added(offset, _scaled(offsets[d], stride))
        stride *= big[d]
    inner = 1
    for d in group[cut + 1 :]:
        inner *= big[d]
    return offset, sizes[group[cut]] * inner


def _added(a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    left = a if not isinstance(a, int) else _index_constant(a)
    right = b if not isinstance(b, int) else _index_constant(b)
    return arith.AddIOp(left, right).result


def _divided(entry: int | ir.Value, factor: int) -> int | ir.Value:
    if isinstance(entry, int):
        return entry // factor
    if factor == 1:
        return entry
    return arith.DivUIOp(entry, _index_constant(factor)).result


def bubble_slices_through_reshape(loop: ir.Operation, reshape: ir.Operation) -> str | None:
    """Rewrite the loop body's slices of ``reshape`` as reshapes of source slices.

    Returns ``None`` when every such slice was rewritten (the reshape is then not read in
    the loop, and its producer can be fused), else why a slice could not be (words that
    follow "the loop's slice of it": "is not contiguous in its source: ...", "has a
    partial last tile: ...").
    """
    users = [u.owner.operation for u in reshape.result.uses]
    slices = [u for u in users if u.name == "tensor.extract_slice" and u.parent == loop]
    expand = reshape.name == "tensor.expand_shape"
    for s in slices:
        if not _unit_strides(s):
            return "has strides other than 1"
        offsets, sizes = _slice_parts(s)
        with ir.InsertionPoint(s):
            found = _source_slice(reshape, offsets, sizes)
            if isinstance(found, str):
                return found
            src_offsets, src_sizes = found
            source = reshape.operands[0]
            element = ir.RankedTensorType(source.type).element_type
            sliced = tensor.ExtractSliceOp(
                ir.RankedTensorType.get(src_sizes, element),
                source,
                [v for v in src_offsets if not isinstance(v, int)],
                [],
                [],
                [v if isinstance(v, int) else _DYNAMIC for v in src_offsets],
                src_sizes,
                [1] * len(src_sizes),
            ).result
            reassociation = reshape.attributes["reassociation"]
            if expand:
                new = tensor.ExpandShapeOp(
                    s.result.type, sliced, reassociation, [], [int(z) for z in sizes]
                ).result
            else:
                new = tensor.CollapseShapeOp(s.result.type, sliced, reassociation).result
        s.result.replace_all_uses_with(new)
        s.erase()
    return None


def forall_to_for(forall: ir.Operation, order: Sequence[int]) -> ir.Operation:
    """Rewrite a static ``scf.forall`` as an ``scf.for`` nest, outermost dim ``order[0]``.

    Returns the outermost ``scf.for``. Requires static bounds (fuse_ext payloads have
    static shapes); raises :class:`FuseExtError` otherwise.
    """
    view = forall.opview
    bounds = [
        list(ir.DenseI64ArrayAttr(forall.attributes[k]))
        for k in ("staticLowerBound", "staticUpperBound", "staticStep")
    ]
    if any(v == _DYNAMIC for b in bounds for v in b):
        raise FuseExtError(
            "fuse_ext: loop: for needs static tile counts, and the tiled parallel loops have "
            "dynamic bounds (dynamic shapes); use loop: forall (the default) there"
        )
    rank = len(bounds[0])
    body = forall.regions[0].blocks[0]
    outputs = list(view.outputs)
    with ir.InsertionPoint(forall):
        loops: list[scf.ForOp] = []
        carried = outputs
        ivs: dict[int, ir.Value] = {}
        for dim in order:
            lb, ub, step = (_index_constant(b[dim]) for b in bounds)
            loop = scf.ForOp(
                lb, ub, step, carried, ip=ir.InsertionPoint(loops[-1].body) if loops else None
            )
            loop.operation.attributes[LOOP_ROLE] = ir.StringAttr.get("parallel")
            loops.append(loop)
            ivs[dim] = loop.induction_variable
            carried = list(loop.inner_iter_args)
    inner = loops[-1].body
    with ir.InsertionPoint(inner):
        placeholder = scf.YieldOp(carried)
    for dim in range(rank):
        body.arguments[dim].replace_all_uses_with(ivs[dim])
    for k, value in enumerate(carried):
        body.arguments[rank + k].replace_all_uses_with(value)
    terminator = None
    for op in list(body.operations):
        op = op.operation
        if op.name == "scf.forall.in_parallel":
            terminator = op
        else:
            op.move_before(placeholder.operation)
    assert terminator is not None
    current = list(carried)
    with ir.InsertionPoint(placeholder.operation):
        for insert in terminator.regions[0].blocks[0].operations:
            insert = insert.operation
            iview = insert.opview
            k = next(i for i, v in enumerate(carried) if v == iview.dest)
            current[k] = tensor.InsertSliceOp(
                iview.source,
                current[k],
                list(iview.offsets),
                list(iview.sizes),
                list(iview.strides),
                insert.attributes["static_offsets"],
                insert.attributes["static_sizes"],
                insert.attributes["static_strides"],
            ).result
        scf.YieldOp(current)
    placeholder.operation.erase()
    for outer, nested in itertools.pairwise(loops):
        with ir.InsertionPoint(outer.body):
            scf.YieldOp(list(nested.results))
    for old, new in zip(forall.results, loops[0].results, strict=True):
        old.replace_all_uses_with(new)
    forall.erase()
    return loops[0].operation


def _after_in_block(user: ir.Operation, anchor: ir.Operation) -> bool:
    """Whether ``user`` (or the op of ``anchor``'s block that holds it) comes after ``anchor``."""
    op: ir.Operation | None = user
    while op is not None and op.parent != anchor.parent:
        parent = op.parent
        op = parent.operation if parent is not None else None
    return op is not None and op != anchor and anchor.is_before_in_block(op)


def yield_results_used_after(
    forall: ir.Operation, producer: ir.Operation, tiled: ir.Operation
) -> bool:
    """Make ``forall`` also yield each result of the fused ``producer`` used after it.

    ``tiled`` is the producer's tile in the loop body (destination style: its init for
    result ``k`` is a slice of the producer's init ``k``, which tells where that tile
    goes). Each such result gets a new ``shared_outs`` entry, initialized with the
    producer's init, that the tile's result is inserted into; uses after the loop read
    the loop's new result instead, so the full-size producer is left unused. Upstream
    fusion yields only the result its consumers read. Returns whether it rebuilt the
    loop (the old loop op is then erased).
    """
    n_inputs = len(producer.opview.inputs)
    later = [
        k
        for k, result in enumerate(producer.results)
        if any(_after_in_block(use.owner.operation, forall) for use in result.uses)
    ]
    slices = {k: _init_slice(tiled.operands[n_inputs + k]) for k in later}
    later = [k for k in later if slices[k] is not None]
    if not later:
        return False
    view = forall.opview
    old_outputs = list(view.outputs)
    bounds = [
        _mixed(forall.attributes[static], list(dynamic))
        for static, dynamic in (
            ("staticLowerBound", view.dynamicLowerBound),
            ("staticUpperBound", view.dynamicUpperBound),
            ("staticStep", view.dynamicStep),
        )
    ]
    with ir.InsertionPoint(forall):
        new = scf.ForallOp(
            *bounds,
            [*old_outputs, *(producer.operands[n_inputs + k] for k in later)],
            mapping=forall.attributes.get("mapping"),
        )
    for name in list(forall.attributes):
        if name not in new.operation.attributes:
            new.operation.attributes[name] = forall.attributes[name]
    old_body, body = forall.regions[0].blocks[0], new.regions[0].blocks[0]
    for old_arg, new_arg in zip(old_body.arguments, body.arguments, strict=False):
        old_arg.replace_all_uses_with(new_arg)
    for op in list(old_body.operations):
        body.append(op.operation)
    extra = list(body.arguments)[len(old_body.arguments) :]
    terminator = list(body.operations)[-1].operation
    for k, arg in zip(later, extra, strict=True):
        source = slices[k]
        assert source is not None
        where = _slice_operands(source)
        with ir.InsertionPoint(tiled):
            destination = tensor.ExtractSliceOp(
                tiled.operands[n_inputs + k].type, arg, *where
            ).result
        tiled.operands[n_inputs + k] = destination
        with ir.InsertionPoint(terminator.regions[0].blocks[0]):
            tensor.ParallelInsertSliceOp(tiled.results[k], arg, *where)
    for old, result in zip(forall.results, new.results, strict=False):
        old.replace_all_uses_with(result)
    for k, result in zip(later, list(new.results)[len(old_outputs) :], strict=True):
        _replace_uses_after(producer.results[k], result, new.operation)
    forall.erase()
    return True


def _slice_operands(op: ir.Operation) -> tuple[object, ...]:
    """A slice op's offsets, sizes, strides (dynamic, then static): where another slice
    op of the same place takes them."""
    view = op.opview
    return (
        list(view.offsets),
        list(view.sizes),
        list(view.strides),
        *(op.attributes[k] for k in ("static_offsets", "static_sizes", "static_strides")),
    )


def _init_slice(init: ir.Value) -> ir.Operation | None:
    """The ``tensor.extract_slice`` a tiled op's init is (where its tile lies), if it is one."""
    owner = init.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "tensor.extract_slice":
        return None
    return owner.operation


def keep_full_copy_after(loop: ir.Operation, producer: ir.Operation) -> None:
    """Give the uses of ``producer`` after ``loop`` a full-size copy of it, placed just
    before the loop (``intermediates: recompute``): upstream fusion would otherwise make
    the loop yield the producer's tile for them. The copy carries no ``tdsched.fid``."""
    copy = producer.clone(ip=ir.InsertionPoint(loop))
    if FID in copy.attributes:
        del copy.attributes[FID]
    for old, new in zip(producer.results, copy.results, strict=True):
        _replace_uses_after(old, new, loop)


def _replace_uses_after(old: ir.Value, new: ir.Value, anchor: ir.Operation) -> None:
    """Make the uses of ``old`` after ``anchor`` (in its block) read ``new``."""
    for use in list(old.uses):
        if _after_in_block(use.owner.operation, anchor):
            use.owner.operation.operands[use.operand_number] = new
