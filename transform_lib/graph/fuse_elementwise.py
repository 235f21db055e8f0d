"""Graph rewrite ``fuse_elementwise_ext``: fuse elementwise generics, vertically and horizontally.

Works on every block of the module that holds selected ops, to a fixpoint:

* **generalize** the selected ``linalg.elementwise``, ``linalg.map``, ``linalg.broadcast``
  and ``linalg.transpose`` ops that have a fusion partner (fills, matmuls and convs are
  never generalized);
* **producer→consumer**: an *elementwise* generic (all loops parallel, every indexing map
  simple, i.e. loop dims or the constant 0 such as ``(d0, d1) -> (d0, 0)``, outputs
  written through permutations) is fused into a generic that reads one of its results.
  A result that is also used elsewhere (returned, read by another op) becomes a result
  of the fused generic, so nothing is computed twice;
* **shared input** (horizontal): elementwise generics with the same loop ranges (static,
  or dynamic and provably equal: read from the same value's dims or the same SSA sizes)
  that read the same tensor through the same map and do not depend on each other become
  one multi-result generic that reads it once; a candidate whose ranges cannot be shown
  equal is named in the report with the loop and why.

Fused generics are placed where their operands are defined and before their users; the
block is re-sorted topologically (stably) after each fusion to keep SSA dominance.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from iree.compiler import ir
from iree.compiler.dialects import arith
from iree.compiler.dialects.transform import structured

from ..generic_build import (
    Extent,
    Operand,
    SimpleMap,
    compose,
    create_generic,
    finish_body,
    is_permutation,
    iterator_kinds,
    loop_extents,
    move_body,
    operands,
    same_extents,
    simple_map,
    simple_results,
)
from ..interpreter import apply_in_place
from ..match import OpCriteria
from ..payload import strip_attributes
from ..script import TransformScript, any_op
from .report import GraphRewriteError, RewriteReport, describe_op, selected

PRIMITIVE = "fuse_elementwise_ext"
CANDIDATE = "tdsched.fuse_elementwise"
"""Marks the ops that may take part (the selection); removed before returning."""
FUSED = "tdsched.fuse_elementwise_fused"
"""Marks the generics this rewrite created, to count them; removed before returning."""
GENERALIZE = "tdsched.fuse_elementwise_generalize"
GENERALIZABLE = ("linalg.elementwise", "linalg.map", "linalg.broadcast", "linalg.transpose")
PARTICIPANTS = ("linalg.generic", *GENERALIZABLE)
_ENTRY = "__fuse_elementwise_generalize"


@dataclass(frozen=True)
class FuseElementwiseOptions:
    """Which ops take part, whether shared-input fusion runs, and the size bound.

    ``max_operands`` bounds the operands (inputs + outputs) of a fused generic: a fusion
    that would exceed it is not done. ``None`` means no bound; otherwise at least 2.
    """

    ops: OpCriteria | None = None
    shared_input: bool = True
    max_operands: int | None = None


def fuse_elementwise_ext(module: ir.Module, options: FuseElementwiseOptions) -> RewriteReport:
    """Fuse the selected elementwise ops of ``module`` in place, to a fixpoint.

    Raises :class:`GraphRewriteError` for options out of range, a selection naming ops
    that cannot take part, or a selected op on buffers.
    """
    _check_options(options)
    candidates = _mark_candidates(module, options.ops)
    log = _Log()
    if candidates:
        blocks = _distinct_blocks(candidates)
        log.generalized, log.scripts = _generalize(module, candidates)
        for block in blocks:
            _fuse_block(block, options, log)
        log.fused_ops = _count_fused(module)
    strip_attributes(module.operation, (CANDIDATE, FUSED, GENERALIZE))
    return log.report(len(candidates), options)


# --- preconditions and selection ------------------------------------------------------


def _check_options(options: FuseElementwiseOptions) -> None:
    if options.max_operands is not None and options.max_operands < 2:
        raise GraphRewriteError(
            f"{PRIMITIVE}: max_operands must be at least 2 (an input and an output), "
            f"got {options.max_operands}; leave it unset for no bound"
        )
    criteria = options.ops
    if criteria is not None and (criteria.kind is not None or criteria.shape is not None):
        raise GraphRewriteError(
            f"{PRIMITIVE}: 'ops' selects by 'op' name and 'attributes' only "
            f"(got {criteria.describe()}); 'kind' and 'shape' select kernels"
        )


def _mark_candidates(module: ir.Module, criteria: OpCriteria | None) -> list[ir.Operation]:
    """Mark (``CANDIDATE``) and return the selected ops that can take part.

    Every selected op is checked before any is marked, so a refused selection leaves the
    module as it was.
    """
    found = [op for op in _all_ops(module) if _takes_part(op, criteria)]
    for op in found:
        op.attributes[CANDIDATE] = ir.UnitAttr.get()
    return found


def _takes_part(op: ir.Operation, criteria: OpCriteria | None) -> bool:
    """Whether ``op`` is selected and can take part.

    A selection by an op name that cannot take part (``linalg.matmul``), or a selected
    op on buffers, is refused, naming the op, rather than silently fusing nothing.
    """
    if criteria is not None and criteria.op == op.name and op.name not in PARTICIPANTS:
        raise GraphRewriteError(
            f"{PRIMITIVE}: {describe_op(op)} is selected by 'ops', but only "
            f"{', '.join(PARTICIPANTS)} take part; select one of those"
        )
    if op.name not in PARTICIPANTS or not selected(op, criteria):
        return False
    if any(isinstance(value.type, ir.MemRefType) for value in op.operands):
        raise GraphRewriteError(
            f"{PRIMITIVE}: {describe_op(op)} works on buffers; {PRIMITIVE} fuses ops on "
            "tensors: run it before bufferization, or leave this op out of 'ops'"
        )
    return True


def _all_ops(module: ir.Module) -> list[ir.Operation]:
    """Every op nested in ``module`` (a list: exceptions cannot leave a walk callback)."""
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return ops


def _distinct_blocks(ops: list[ir.Operation]) -> list[ir.Block]:
    blocks: list[ir.Block] = []
    for op in ops:
        if op.block not in blocks:
            blocks.append(op.block)
    return blocks


def _generalize(
    module: ir.Module, candidates: list[ir.Operation]
) -> tuple[list[str], tuple[str, ...]]:
    """Generalize the named candidates that have a partner; describe them, and the script.

    A named op without a candidate producer, consumer or input-sharing neighbour would
    only be rewritten for nothing, so it is left as it is.
    """
    chosen = [op for op in candidates if op.name in GENERALIZABLE and _has_partner(op)]
    if not chosen:
        return [], ()
    described = [describe_op(op) for op in chosen]
    for op in chosen:
        op.attributes[GENERALIZE] = ir.UnitAttr.get()
    script = TransformScript(ir.Context.current)
    sequence = script.named_sequence(_ENTRY, arg_effect="consumed")
    with sequence.building():
        marked = ir.DictAttr.get({GENERALIZE: ir.UnitAttr.get()})
        structured.GeneralizeOp(
            structured.MatchOp(any_op(), sequence.argument, op_attrs=marked).result
        )
    sequence.finish()
    text = script.text()
    apply_in_place(module, text, _ENTRY)
    return described, (text,)


def _has_partner(op: ir.Operation) -> bool:
    """Whether another candidate produces, reads, or shares an input with ``op``."""
    num_inputs = len(op.operands) - len(op.results)
    for value in list(op.operands)[:num_inputs]:
        owner = value.owner
        if isinstance(owner, ir.OpView) and CANDIDATE in owner.operation.attributes:
            return True
        if any(_other_candidate(use.owner, op) for use in value.uses):
            return True
    return any(_other_candidate(use.owner, op) for r in op.results for use in r.uses)


def _other_candidate(user: ir.OpView | ir.Operation, op: ir.Operation) -> bool:
    return user.operation != op and CANDIDATE in user.operation.attributes


def _candidate_generic(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and CANDIDATE in op.attributes


def _elementwise(op: ir.Operation) -> bool:
    """An all-parallel candidate generic with simple maps, writing through permutations."""
    if not _candidate_generic(op):
        return False
    kinds = iterator_kinds(op)
    inputs, outputs = operands(op)
    return (
        all(kind == "parallel" for kind in kinds)
        and all(simple_results(o.map) is not None for o in inputs)
        and all(is_permutation(simple_results(o.map), len(kinds)) for o in outputs)
    )


def _count_fused(module: ir.Module) -> int:
    return sum(FUSED in op.attributes for op in _all_ops(module))


# --- the block's dependence graph -----------------------------------------------------


class _Graph:
    """A block's top-level ops and their use-def edges, uses in nested regions included."""

    def __init__(self, block: ir.Block) -> None:
        self.ops = [op.operation for op in block.operations]
        defined = {result: i for i, op in enumerate(self.ops) for result in op.results}
        self.users_of: dict[ir.Value, set[int]] = {}
        self.deps: list[set[int]] = []
        for i, op in enumerate(self.ops):
            deps: set[int] = set()
            for value in _used_values(op):
                j = defined.get(value)
                if j is not None and j != i:
                    deps.add(j)
                    self.users_of.setdefault(value, set()).add(i)
            self.deps.append(deps)
        self.users: list[set[int]] = [set() for _ in self.ops]
        for i, deps in enumerate(self.deps):
            for j in deps:
                self.users[j].add(i)

    def reaches(self, source: int, target: int) -> bool:
        """Whether ``target`` depends on ``source``, transitively."""
        seen, stack = {source}, [source]
        while stack:
            for user in self.users[stack.pop()]:
                if user == target:
                    return True
                if user not in seen:
                    seen.add(user)
                    stack.append(user)
        return False

    def topological_order(self) -> list[int]:
        """The ops in an order where each follows its dependencies, otherwise as now."""
        waiting = [len(deps) for deps in self.deps]
        ready = [i for i, count in enumerate(waiting) if count == 0]
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for user in self.users[i]:
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, user)
        return order


def _used_values(op: ir.Operation) -> list[ir.Value]:
    values: list[ir.Value] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        values.extend(inner.operands)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return values


def _restore_dominance(block: ir.Block) -> None:
    """Move ops so that each follows what it uses (a stable topological sort)."""
    graph = _Graph(block)
    order = graph.topological_order()
    if len(order) != len(graph.ops) or order[-1] != len(graph.ops) - 1:
        raise GraphRewriteError(f"{PRIMITIVE}: a fusion made a dependence cycle (a tdsched bug)")
    if order == sorted(order):
        return
    terminator = graph.ops[-1]
    for i in order[:-1]:
        graph.ops[i].move_before(terminator)


# --- merges: the plan of one new generic ----------------------------------------------

Feed = tuple[int, int]
"""A body argument of a merged generic: (position in ``sources``, argument number)."""


@dataclass
class _Slot:
    """An operand of the new generic and the old body arguments it binds."""

    operand: Operand
    feeds: list[Feed]


@dataclass
class _Merge:
    """One new generic: old generics whose bodies it takes, in order, and its operands.

    ``forwarded`` binds a body argument to a value an earlier source yields (the
    producer's result read by the consumer); ``results`` lists (source, result) pairs
    the new generic returns; ``loop_maps`` gives each source's loops in terms of the new
    loops (``None``: the same loops).
    """

    kind: str
    sources: list[ir.Operation]
    iterators: tuple[str, ...]
    loop_maps: list[SimpleMap | None]
    note: str = ""
    inputs: list[_Slot] = field(default_factory=list)
    outputs: list[_Slot] = field(default_factory=list)
    forwarded: dict[Feed, Feed] = field(default_factory=dict)
    results: list[Feed] = field(default_factory=list)

    @property
    def num_operands(self) -> int:
        return len(self.inputs) + len(self.outputs)

    def add_input(self, operand: Operand, feed: Feed) -> None:
        """Add an input, sharing the slot of an equal one (same value, same map)."""
        for slot in self.inputs:
            if slot.operand.value == operand.value and slot.operand.map == operand.map:
                slot.feeds.append(feed)
                return
        self.inputs.append(_Slot(operand, [feed]))

    def add_output(self, operand: Operand, source: int, argument: int, result: int) -> None:
        self.outputs.append(_Slot(operand, [(source, argument)]))
        self.results.append((source, result))


def _distinct_outputs(outputs: list[Operand]) -> list[Operand]:
    """``outputs`` with a fresh ``tensor.empty`` for each repeat of an empty init.

    Frontends often share one ``tensor.empty`` among ops; as two outputs of one op it
    would make IREE tie both results to one buffer and copy (measured: 1.7x slower).
    Must be called with the insertion point where the fused op goes.
    """
    seen: list[ir.Value] = []
    distinct = []
    for operand in outputs:
        value = operand.value
        owner = value.owner
        if value in seen and isinstance(owner, ir.OpView) and owner.name == "tensor.empty":
            value = owner.operation.clone().result
        seen.append(value)
        distinct.append(Operand(value, operand.map))
    return distinct


def _build(merge: _Merge) -> None:
    """Create the merged generic before the last source, and replace the sources."""
    sources = merge.sources
    with ir.InsertionPoint(sources[-1]):
        generic, block = create_generic(
            [s.operand for s in merge.inputs],
            _distinct_outputs([s.operand for s in merge.outputs]),
            merge.iterators,
            ir.Location.fused([s.location for s in sources]),
        )
    bound: dict[Feed, ir.Value] = {}
    for slot, argument in zip([*merge.inputs, *merge.outputs], block.arguments, strict=True):
        for feed in slot.feeds:
            bound[feed] = argument
    yielded: list[list[ir.Value]] = []
    for s, (source, loop_map) in enumerate(zip(sources, merge.loop_maps, strict=True)):
        if loop_map is not None:
            _remap_indices(source, loop_map)
        arguments = source.regions[0].blocks[0].arguments
        args = [_argument_value(merge, bound, yielded, (s, a)) for a in range(len(arguments))]
        yielded.append(move_body(source, block, args))
    finish_body(block, [yielded[s][r] for s, r in merge.results])
    for new, (s, r) in zip(generic.results, merge.results, strict=True):
        sources[s].results[r].replace_all_uses_with(new)
    for source in reversed(sources):
        source.erase()
    generic.attributes[CANDIDATE] = ir.UnitAttr.get()
    generic.attributes[FUSED] = ir.UnitAttr.get()


def _argument_value(
    merge: _Merge, bound: dict[Feed, ir.Value], yielded: list[list[ir.Value]], feed: Feed
) -> ir.Value | None:
    if feed in bound:
        return bound[feed]
    if feed in merge.forwarded:
        source, position = merge.forwarded[feed]
        return yielded[source][position]
    return None


def _remap_indices(source: ir.Operation, loop_map: SimpleMap) -> None:
    """Rewrite ``linalg.index`` in ``source``'s body for the new loops (``loop_map``)."""
    indices: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.index":
            indices.append(op)
        return ir.WalkResult.ADVANCE

    source.walk(visit)
    for index in indices:
        loop = loop_map[ir.IntegerAttr(index.attributes["dim"]).value]
        if loop is None:
            with ir.InsertionPoint(index):
                zero = arith.ConstantOp(ir.IndexType.get(), 0).result
            index.result.replace_all_uses_with(zero)
            index.erase()
        else:
            index.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), loop)


# --- producer→consumer ----------------------------------------------------------------


def _next_pair(graph: _Graph, max_operands: int | None, notes: list[str]) -> _Merge | None:
    """The first elementwise producer→consumer fusion that is possible, if any.

    Each pair that cannot be fused adds a note saying why.
    """
    for p, producer in enumerate(graph.ops):
        if not _elementwise(producer):
            continue
        for c in sorted(graph.users[p]):
            consumer = graph.ops[c]
            if not _candidate_generic(consumer):
                continue
            plan = _plan_pair(graph, p, c, max_operands)
            if isinstance(plan, _Merge):
                return plan
            notes.append(f"not fused: {describe_op(producer)} into {describe_op(consumer)}: {plan}")
    return None


def _plan_pair(graph: _Graph, p: int, c: int, max_operands: int | None) -> _Merge | str:
    """The merge fusing producer ``p`` into consumer ``c``, or why it cannot be done."""
    producer, consumer = graph.ops[p], graph.ops[c]
    results = list(producer.results)
    c_inputs, _ = operands(consumer)
    read_as_input = sum(o.value in results for o in c_inputs)
    if sum(v in results for v in _used_values(consumer)) != read_as_input:
        return "the consumer reads its result as an init or inside its body"
    loop_map = _producer_loops(producer, c_inputs)
    if isinstance(loop_map, str):
        return loop_map
    yielded = [r for r, v in enumerate(results) if graph.users_of.get(v, set()) - {c}]
    num_loops = len(iterator_kinds(consumer))
    element_for_element = is_permutation(loop_map, num_loops) and all(
        kind == "parallel" for kind in iterator_kinds(consumer)
    )
    if yielded and not element_for_element:
        return (
            "its result is also used elsewhere and the consumer does not read it element "
            "for element in parallel loops, so fusing would compute it twice"
        )
    if any(graph.reaches(p, d) for d in graph.deps[c] - {p}):
        return "another operand of the consumer depends on it"
    merge = _pair_merge(producer, consumer, loop_map, yielded)
    if max_operands is not None and merge.num_operands > max_operands:
        return (
            f"the fused generic would have {merge.num_operands} operands "
            f"(max_operands={max_operands})"
        )
    merge.note = f"producer→consumer: {describe_op(producer)} into {describe_op(consumer)}" + (
        f" (also yields {len(yielded)} of its results)" if yielded else ""
    )
    return merge


def _producer_loops(producer: ir.Operation, c_inputs: list[Operand]) -> SimpleMap | str:
    """The producer's loops in terms of the consumer's, from how the consumer reads it.

    Every read must give the same map (the producer is computed once per consumer
    iteration); the producer writes each result through a permutation, so it inverts.
    """
    results = list(producer.results)
    _, p_outputs = operands(producer)
    found: set[SimpleMap] = set()
    for operand in c_inputs:
        if operand.value not in results:
            continue
        read = simple_results(operand.map)
        if read is None:
            return "the consumer reads its result through a map that is not simple"
        written = simple_results(p_outputs[results.index(operand.value)].map)
        assert written is not None
        found.add(tuple(read[written.index(loop)] for loop in range(len(written))))
    if len(found) != 1:
        return "the consumer reads its results at different points"
    return found.pop()


def _pair_merge(
    producer: ir.Operation, consumer: ir.Operation, loop_map: SimpleMap, yielded: list[int]
) -> _Merge:
    """Consumer inputs with the producer's spliced in where it read the producer.

    Producer inits that its body reads become inputs unless their result is yielded.
    """
    num_loops = len(iterator_kinds(consumer))
    merge = _Merge(
        "producer→consumer", [producer, consumer], iterator_kinds(consumer), [loop_map, None]
    )
    p_inputs, p_outputs = operands(producer)
    c_inputs, c_outputs = operands(consumer)
    results = list(producer.results)

    def moved(operand: Operand) -> Operand:
        results_map = simple_results(operand.map)
        assert results_map is not None
        return Operand(operand.value, simple_map(num_loops, compose(results_map, loop_map)))

    spliced = False
    for a, operand in enumerate(c_inputs):
        if operand.value not in results:
            merge.add_input(operand, (1, a))
            continue
        merge.forwarded[(1, a)] = (0, results.index(operand.value))
        if not spliced:
            spliced = True
            for b, p_input in enumerate(p_inputs):
                merge.add_input(moved(p_input), (0, b))
            for r in _read_inits(producer, yielded):
                merge.add_input(moved(p_outputs[r]), (0, len(p_inputs) + r))
    for r, c_output in enumerate(c_outputs):
        merge.add_output(c_output, 1, len(c_inputs) + r, r)
    for r in yielded:
        merge.add_output(moved(p_outputs[r]), 0, len(p_inputs) + r, r)
    return merge


def _read_inits(producer: ir.Operation, yielded: list[int]) -> list[int]:
    """The producer outputs whose init its body reads but whose result is not yielded.

    The fused generic must read those inits as inputs.
    """
    arguments = list(producer.regions[0].blocks[0].arguments)
    num_inputs = len(arguments) - len(producer.results)
    return [
        r
        for r in range(len(producer.results))
        if r not in yielded and list(arguments[num_inputs + r].uses)
    ]


# --- shared input ---------------------------------------------------------------------


def _next_group(graph: _Graph, max_operands: int | None, notes: list[str]) -> _Merge | None:
    """The first group of independent elementwise generics sharing an input, if any."""
    extents = {
        i: found
        for i, op in enumerate(graph.ops)
        if _elementwise(op) and (found := loop_extents(op)) is not None
    }
    members = list(extents)
    for first in members:
        for shared in operands(graph.ops[first])[0]:
            if not isinstance(shared.value.type, ir.RankedTensorType):
                continue  # a shared scalar (a constant) saves no traffic
            group = _group(graph, first, shared, extents, max_operands, notes)
            if len(group) > 1:
                merge = _horizontal([graph.ops[i] for i in group])
                name = shared.value.get_name()
                merge.note = f"shared-input ({name}): " + ", ".join(
                    describe_op(graph.ops[i]) for i in group
                )
                return merge
    return None


def _group(
    graph: _Graph,
    first: int,
    shared: Operand,
    extents: dict[int, tuple[frozenset[Extent], ...]],
    max_operands: int | None,
    notes: list[str],
) -> list[int]:
    """``first`` and the later members (the keys of ``extents``) that can join it,
    reading ``shared`` like it, with loops provably of the same ranges."""
    group = [first]
    for other, loops in extents.items():
        op = graph.ops[other]
        if other <= first:
            continue
        if not any(o.value == shared.value and o.map == shared.map for o in operands(op)[0]):
            continue
        unequal = same_extents(extents[first], loops)
        if unequal is not None:
            notes.append(
                f"not fused: {describe_op(op)} with {describe_op(graph.ops[first])} "
                f"(shared input {shared.value.get_name()}): loop {unequal} is "
                f"{_describe_extent(extents[first], unequal)} in one and "
                f"{_describe_extent(loops, unequal)} in the other, which are not provably "
                "equal (dynamic sizes are equal when read from the same value's dim or "
                "the same SSA size)"
            )
            continue
        if any(graph.reaches(i, other) or graph.reaches(other, i) for i in group):
            continue
        size = _horizontal([graph.ops[i] for i in [*group, other]]).num_operands
        if max_operands is not None and size > max_operands:
            notes.append(
                f"not fused: {describe_op(op)} with {describe_op(graph.ops[first])} "
                f"(shared input): {size} operands (max_operands={max_operands})"
            )
            continue
        group.append(other)
    return group


def _describe_extent(loops: tuple[frozenset[Extent], ...], d: int) -> str:
    """Loop ``d``'s range as a reader would name it (its static size, or its sources)."""
    if d >= len(loops):
        return "missing"
    static = sorted(k for k in loops[d] if isinstance(k, int))
    if static:
        return str(static[0])
    names = sorted(
        f"dim {k[2]} of {k[1].get_name()}" if len(k) == 3 else k[1].get_name()
        for k in loops[d]
        if not isinstance(k, int)
    )
    return "dynamic (" + ", ".join(names) + ")"


def _horizontal(ops: list[ir.Operation]) -> _Merge:
    """One generic running ``ops`` (same loops) side by side.

    Inputs are merged (an input read through the same map by several is read once),
    outputs and results concatenated in the order of ``ops``.
    """
    merge = _Merge("shared-input", ops, iterator_kinds(ops[0]), [None] * len(ops))
    for s, op in enumerate(ops):
        inputs, _ = operands(op)
        for a, operand in enumerate(inputs):
            merge.add_input(operand, (s, a))
    for s, op in enumerate(ops):
        inputs, outputs = operands(op)
        for r, operand in enumerate(outputs):
            merge.add_output(operand, s, len(inputs) + r, r)
    return merge


# --- the fixpoint and its report ------------------------------------------------------


def _fuse_block(block: ir.Block, options: FuseElementwiseOptions, log: _Log) -> None:
    """Fuse in ``block`` until nothing changes; producer→consumer first, then groups."""
    while True:
        graph = _Graph(block)
        notes: list[str] = []
        merge = _next_pair(graph, options.max_operands, notes)
        if merge is None and options.shared_input:
            merge = _next_group(graph, options.max_operands, notes)
        if merge is None:
            log.unfused.extend(dict.fromkeys(notes))  # once each, in order
            return
        log.record(merge)
        _build(merge)
        _restore_dominance(block)


@dataclass
class _Log:
    """What the rewrite did, for its report."""

    generalized: list[str] = field(default_factory=list)
    scripts: tuple[str, ...] = ()
    fusions: list[str] = field(default_factory=list)
    unfused: list[str] = field(default_factory=list)
    pairs: int = 0
    groups: int = 0
    removed: int = 0
    fused_ops: int = 0

    def record(self, merge: _Merge) -> None:
        self.fusions.append(merge.note)
        self.removed += len(merge.sources) - 1
        if merge.kind == "shared-input":
            self.groups += 1
        else:
            self.pairs += 1

    def report(self, selected_count: int, options: FuseElementwiseOptions) -> RewriteReport:
        details = (
            *(f"generalized {g}" for g in self.generalized),
            *self.fusions,
            *self.unfused,
        )
        if self.fusions:
            summary = (
                f"fused {self.fused_ops + self.removed} generics into {self.fused_ops} "
                f"({self._kinds()})"
            )
        elif selected_count == 0:
            what = options.ops.describe() if options.ops else "; ".join(PARTICIPANTS)
            summary = f"changed nothing: no op matches {what}"
        else:
            reason = (
                "no fusable elementwise producer/consumer pair or shared input among "
                f"{selected_count} selected op(s)"
            )
            done = f"generalized {len(self.generalized)} named op(s), fused nothing"
            summary = f"{done}: {reason}" if self.generalized else f"changed nothing: {reason}"
        changed = bool(self.fusions or self.generalized)
        return RewriteReport(PRIMITIVE, summary, changed, details, self.scripts)

    def _kinds(self) -> str:
        parts = []
        if self.pairs:
            parts.append(f"{self.pairs} producer→consumer")
        if self.groups:
            parts.append(f"{self.groups} shared-input group{'s' if self.groups > 1 else ''}")
        return ", ".join(parts)
