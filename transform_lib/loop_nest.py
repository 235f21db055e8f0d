"""The loop nest of a payload, read from its IR: what ``tdsched explain`` prints.

A compact view in the spirit of Halide's ``print_loop_nest()``: each ``scf.for`` and
``scf.forall`` with its range, step, trip count and role, and inside each loop body the
ops that do the work (linalg ops with their operand shapes, vector ops with their vector
types, pads), in IR order. Index arithmetic, slices, constants and buffer plumbing are
left out. Everything shown is read from the IR given, never from the recipe.

A loop's *role*:

* ``parallel``: a ``forall``, or a ``for`` whose induction variable positions a slice,
  read or write of the tensor it carries (each iteration owns its own part of it);
* ``reduction``: a ``for`` that carries a tensor it accesses at positions that do not
  depend on its induction variable (each iteration updates the same accumulator);
* no role: a ``for`` that carries nothing (e.g. after bufferization).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from iree.compiler import ir

_DYNAMIC = -(2**63)
"""How MLIR's static-bound arrays (``scf.forall``) mark a dynamic bound."""

_POSITIONING = frozenset(
    {
        "tensor.extract_slice",
        "tensor.insert_slice",
        "tensor.parallel_insert_slice",
        "tensor.extract",
        "tensor.insert",
        "vector.transfer_read",
        "vector.transfer_write",
    }
)
"""Ops that read or write part of a tensor at index operands (for a loop's role)."""

_SHOWN_PREFIXES = ("linalg.", "vector.")
_SHOWN_OPS = frozenset({"tensor.pad", "tensor.pack", "tensor.unpack"})
_HIDDEN_VECTOR_OPS = frozenset(
    {"vector.extract", "vector.insert", "vector.shape_cast", "vector.yield", "vector.step"}
)
"""Vector plumbing left out, like index arithmetic is."""


@dataclass(frozen=True)
class NestLine:
    """One line of a loop nest: its nesting depth and what it shows."""

    depth: int
    text: str

    def render(self, indent: str = "  ") -> str:
        return indent * self.depth + self.text


class LoopNestError(ValueError):
    """The IR given could not be parsed."""


def loop_nest(ir_text: str) -> list[NestLine]:
    """The loop nest of every function in ``ir_text`` (a module or a printed function).

    Each function with a body starts a ``func @name`` line at depth 0.
    """
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(ir_text)
        except ir.MLIRError as exc:
            raise LoopNestError(f"cannot parse the IR: {exc}") from exc
        lines: list[NestLine] = []
        for op in _walk_functions(module.body.operations):
            lines.append(NestLine(0, f"func @{_symbol(op)}"))
            for region in op.regions:
                for block in region.blocks:
                    lines.extend(_block(block, 1))
        return lines


def render(lines: Iterable[NestLine]) -> str:
    """The nest as text, two spaces per level."""
    return "\n".join(line.render() for line in lines)


def _walk_functions(ops: Iterable[ir.OpView]) -> Iterator[ir.Operation]:
    """Function-like ops with a body, also inside nested modules and executables."""
    for view in ops:
        op = view.operation
        if op.name in ("func.func", "util.func"):
            if op.regions and op.regions[0].blocks:
                yield op
            continue
        for region in op.regions:
            for block in region.blocks:
                yield from _walk_functions(block.operations)


def _symbol(op: ir.Operation) -> str:
    return str(ir.StringAttr(op.attributes["sym_name"]).value)


def _block(block: ir.Block, depth: int) -> list[NestLine]:
    """The lines of one block: loops (with their bodies), shown ops, nested regions."""
    lines: list[NestLine] = []
    run: list[ir.Operation] = []

    def flush() -> None:
        if run:
            lines.append(NestLine(depth, _vector_run(run)))
            run.clear()

    for view in block.operations:
        op = view.operation
        name = op.name
        if name.startswith("vector.") and name not in _HIDDEN_VECTOR_OPS:
            if run and run[0].name != name:
                flush()
            run.append(op)
            continue
        if name == "scf.for":
            flush()
            lines.append(NestLine(depth, _for_header(op)))
            lines.extend(_block(op.regions[0].blocks[0], depth + 1))
        elif name == "scf.forall":
            flush()
            lines.append(NestLine(depth, _forall_header(op)))
            lines.extend(_block(op.regions[0].blocks[0], depth + 1))
        elif name.startswith(_SHOWN_PREFIXES) or name in _SHOWN_OPS:
            flush()
            lines.append(NestLine(depth, _structured(op)))
        elif op.regions and name not in ("scf.forall.in_parallel",):
            inner = [line for r in op.regions for b in r.blocks for line in _block(b, depth + 1)]
            if inner:
                flush()
                lines.append(NestLine(depth, name))
                lines.extend(inner)
    flush()
    return lines


def _for_header(op: ir.Operation) -> str:
    """``for %arg3 = 0 to 1024 step 64  (16 trips, reduction)``."""
    lb, ub, step = (_constant(op.operands[i]) for i in range(3))
    body = op.regions[0].blocks[0]
    iv = body.arguments[0]
    bounds = " ".join(
        [
            f"for {iv.get_name()} = {_bound(lb, op.operands[0])}",
            f"to {_bound(ub, op.operands[1])}",
            f"step {_bound(step, op.operands[2])}",
        ]
    )
    trips = _trips(lb, ub, step)
    facts = [_trip_text(trips)]
    carried = list(body.arguments)[1:]
    if carried:
        facts.append("parallel" if _positions_carried(iv, carried, body) else "reduction")
    return f"{bounds}  ({', '.join(facts)})"


def _forall_header(op: ir.Operation) -> str:
    """``forall (%arg0, %arg1) in (32, 8)  (256 trips, parallel, workgroup y, x)``."""
    attrs = op.attributes
    lbs = _static_array(attrs["staticLowerBound"])
    ubs = _static_array(attrs["staticUpperBound"])
    steps = _static_array(attrs["staticStep"])
    body = op.regions[0].blocks[0]
    ivs = ", ".join(a.get_name() for a in list(body.arguments)[: len(ubs)])
    if all(lb == 0 for lb in lbs) and all(s == 1 for s in steps):
        bounds = f"forall ({ivs}) in ({_list(ubs)})"
    else:
        bounds = f"forall ({ivs}) = ({_list(lbs)}) to ({_list(ubs)}) step ({_list(steps)})"
    counts = [_trips(lb, ub, s) for lb, ub, s in zip(lbs, ubs, steps, strict=True)]
    known = [c for c in counts if c is not None]
    trips = math.prod(known) if len(known) == len(counts) else None
    facts = [_trip_text(trips), "parallel"]
    if "mapping" in attrs:
        facts.append(_mapping(attrs["mapping"]))
    return f"{bounds}  ({', '.join(facts)})"


_MAPPING_KIND = {"block": "workgroup", "workgroup_mapping": "workgroup", "thread": "thread"}


def _mapping(attr: ir.Attribute) -> str:
    """``#gpu.block<y>, #gpu.block<x>`` → ``workgroup y, x``; unknown kinds as printed."""
    parts = re.findall(r"#\w+\.(\w+)<([^>]*)>", str(attr))
    if not parts:
        return f"mapping {attr}"
    kinds = {_MAPPING_KIND.get(kind, kind) for kind, _ in parts}
    dims = ", ".join(dim for _, dim in parts)
    return f"{'/'.join(sorted(kinds))} {dims}"


def _static_array(attr: ir.Attribute) -> list[int | None]:
    values = [int(v) for v in ir.DenseI64ArrayAttr(attr)]
    return [None if v == _DYNAMIC else v for v in values]


def _list(values: list[int | None]) -> str:
    return ", ".join("?" if v is None else str(v) for v in values)


def _constant(value: ir.Value) -> int | None:
    """The integer a value is defined as by ``arith.constant``, if it is."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name != "arith.constant" or "value" not in op.attributes:
        return None
    try:
        return int(ir.IntegerAttr(op.attributes["value"]).value)
    except ValueError:
        return None


def _bound(known: int | None, value: ir.Value) -> str:
    return str(known) if known is not None else value.get_name()


def _trip_text(trips: int | None) -> str:
    if trips is None:
        return "? trips"
    return "1 trip" if trips == 1 else f"{trips} trips"


def _trips(lb: int | None, ub: int | None, step: int | None) -> int | None:
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))


def _positions_carried(iv: ir.Value, carried: list[ir.Value], body: ir.Block) -> bool:
    """Whether the induction variable positions an access to a tensor the loop carries."""
    indices = _index_slice(iv)
    tensors = _carried_slice(carried)
    for op in _ops_under(body):
        if op.name not in _POSITIONING:
            continue
        operands = list(op.operands)
        if any(v in tensors for v in operands) and any(v in indices for v in operands):
            return True
    return False


def _index_slice(iv: ir.Value) -> set[ir.Value]:
    """Index and integer values computed from ``iv`` by region-free ops
    (``affine.apply``, ``arith``...): the positions it determines."""
    found = {iv}
    work = [iv]
    while work:
        value = work.pop()
        for use in value.uses:
            owner = use.owner
            if owner.regions:
                continue
            for result in owner.results:
                if result not in found and _is_position(result.type):
                    found.add(result)
                    work.append(result)
    return found


def _is_position(t: ir.Type) -> bool:
    return isinstance(t, ir.IndexType | ir.IntegerType)


def _carried_slice(carried: list[ir.Value]) -> set[ir.Value]:
    """Values derived from the carried tensors, through nested loops' carried arguments."""
    found = set(carried)
    work = list(carried)
    while work:
        value = work.pop()
        for use in value.uses:
            owner = use.owner
            derived = list(owner.results) + _region_arguments_for(owner, use.operand_number)
            for result in derived:
                if result not in found:
                    found.add(result)
                    work.append(result)
    return found


def _region_arguments_for(op: ir.Operation, operand: int) -> list[ir.Value]:
    """The block argument a loop binds to its ``operand`` (an init or shared output)."""
    if op.name == "scf.for" and operand >= 3:
        return [op.regions[0].blocks[0].arguments[operand - 3 + 1]]
    if op.name == "scf.forall":
        body = op.regions[0].blocks[0]
        outputs = len(op.results)
        first_output = len(op.operands) - outputs
        if operand >= first_output:
            ivs = len(body.arguments) - outputs
            return [body.arguments[ivs + operand - first_output]]
    return []


def _ops_under(block: ir.Block) -> Iterator[ir.Operation]:
    for view in block.operations:
        op = view.operation
        yield op
        for region in op.regions:
            for inner in region.blocks:
                yield from _ops_under(inner)


def _structured(op: ir.Operation) -> str:
    """``linalg.matmul ins(8x64xf32, 64x32xf32) outs(8x32xf32)``; generics add their
    iterator kinds; other shown ops their operand and result types."""
    name = op.name
    if "operandSegmentSizes" in op.attributes:
        sizes = [int(v) for v in ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])]
        if len(sizes) == 2:
            ins, outs = list(op.operands)[: sizes[0]], list(op.operands)[sizes[0] :]
            shown_ins = _types(ins)
            text = f"{name} ins({shown_ins}) " if shown_ins else f"{name} "
            text += f"outs({_types(outs)})"
            if "iterator_types" in op.attributes:
                text += f" [{_iterators(op.attributes['iterator_types'])}]"
            return text
    if len(op.results):
        # pack, unpack, pad: what they read (their first operand) and what they make.
        return f"{name} {_types(list(op.operands)[:1])} -> {_types(list(op.results))}"
    return f"{name} {_types(list(op.operands))}".rstrip()


def _iterators(attr: ir.Attribute) -> str:
    kinds = re.findall(r"iterator_type<(\w+)>|\"(\w+)\"", str(attr))
    short = {"parallel": "par", "reduction": "red"}
    return ", ".join(short.get(a or b, a or b) for a, b in kinds)


def _types(values: list[ir.Value]) -> str:
    return ", ".join(_short_type(v.type) for v in values if _short_type(v.type))


def _short_type(t: ir.Type) -> str:
    """``tensor<8x32xf32>`` → ``8x32xf32``, ``vector<[4]x8xf32>`` likewise; index and
    scalar operands (positions, padding values) are left out."""
    text = str(t)
    match = re.fullmatch(r"(?:tensor|vector|memref)<(.*?)(?:, .*)?>", text)
    return match.group(1) if match else ""


def _vector_run(ops: list[ir.Operation]) -> str:
    """Consecutive vector ops of one name: ``vector.fma (4 ops)  16xf32``, with the distinct
    vector shapes each uses (its result, or what it writes)."""
    shapes = list(dict.fromkeys(_vector_shape(op) for op in ops))
    count = f" ({len(ops)} ops)" if len(ops) > 1 else ""
    shown = ", ".join(s for s in shapes if s)
    return f"{ops[0].name}{count}" + (f"  {shown}" if shown else "")


def _vector_shape(op: ir.Operation) -> str:
    """The vector types an op reads and makes: ``8x1xf32 · 1x32xf32 → 8x32xf32``."""
    vector_in = [_short_type(v.type) for v in op.operands if str(v.type).startswith("vector<")]
    vector_out = [_short_type(v.type) for v in op.results if str(v.type).startswith("vector<")]
    if op.name == "vector.transfer_read":
        return vector_out[0]
    if op.name == "vector.transfer_write":
        return vector_in[0]
    if vector_in and vector_out:
        return f"{' · '.join(vector_in)} → {', '.join(vector_out)}"
    return ", ".join(vector_out or vector_in)
