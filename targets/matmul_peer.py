"""numpy's equivalent of a workload file that is one matmul: what ``tdsched run --peers``
times as the ``numpy`` peer for a workload read from MLIR, TOSA or ONNX (a generator
names its own peer).

A workload qualifies when its entry function computes one ``linalg.matmul`` or
``linalg.batch_matmul`` of two of its arguments into a zero-filled ``tensor.empty`` and
returns that result alone, every operand of the same ``f32`` or ``f64`` element type.
Either operand may be transposed through the op's ``indexing_maps`` (``A`` as ``KxM``,
``B`` as ``NxK``). Then ``a @ b`` on numpy (OpenBLAS), transposes taken as views, is what
a user would call instead. Anything else (an epilogue, a bias, a constant or broadcast
operand, a second op, integer types) has no peer: numpy's equivalent would not be one
call a user would pick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from iree.compiler import ir

Peer = Callable[[Sequence[np.ndarray]], list[np.ndarray]]
"""A workload's ``peer`` (:class:`~.workload.Workload`): its inputs in, numpy's outputs."""

CONTRACTIONS = {"linalg.matmul": 3, "linalg.batch_matmul": 4}
"""The ops with a numpy peer, and their loop count (``[batch,] m, n, k``)."""
ALLOWED = {"arith.constant", "tensor.empty", "linalg.fill", "func.return", *CONTRACTIONS}
FLOATS = {"f32", "f64"}


def matmul_peer(function: ir.Operation) -> Peer | None:
    """``a @ b`` in numpy when ``function`` (a ``func.func``) is one matmul of two of its
    arguments (see the module docstring), else None."""
    ops = [op.operation for op in function.regions[0].blocks[0].operations]
    if any(op.name not in ALLOWED for op in ops):
        return None
    contractions = [op for op in ops if op.name in CONTRACTIONS]
    if len(contractions) != 1:
        return None
    op = contractions[0]
    if not _returns_only(ops[-1], op) or not _zero_filled(op.operands[2]):
        return None
    arguments = [_argument(value) for value in op.operands[:2]]
    element_types = {_element_type(value) for value in (*op.operands, op.results[0])}
    if None in arguments or len(element_types) != 1 or not element_types <= FLOATS:
        return None
    transposed = _transposed(op, CONTRACTIONS[op.name])
    if transposed is None:
        return None
    (a, b), (ta, tb) = arguments, transposed
    assert a is not None and b is not None

    def peer(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        left = np.swapaxes(inputs[a], -1, -2) if ta else inputs[a]
        right = np.swapaxes(inputs[b], -1, -2) if tb else inputs[b]
        return [np.matmul(left, right)]

    return peer


def _returns_only(last: ir.Operation, op: ir.Operation) -> bool:
    return last.name == "func.return" and list(last.operands) == [op.results[0]]


def _argument(value: ir.Value) -> int | None:
    """The function argument ``value`` is (its position), or None."""
    return int(value.arg_number) if isinstance(value, ir.BlockArgument) else None


def _zero_filled(value: ir.Value) -> bool:
    """Whether ``value`` is a ``linalg.fill`` of a constant zero into a ``tensor.empty``."""
    fill = value.owner
    if not isinstance(fill, ir.OpView) or fill.operation.name != "linalg.fill":
        return False
    scalar, init = (v.owner for v in fill.operation.operands)
    if not isinstance(scalar, ir.OpView) or scalar.operation.name != "arith.constant":
        return False
    if not isinstance(init, ir.OpView) or init.operation.name != "tensor.empty":
        return False
    constant = scalar.operation.attributes["value"]
    return isinstance(constant, ir.FloatAttr) and constant.value == 0.0


def _element_type(value: ir.Value) -> str | None:
    kind = value.type
    return str(kind.element_type) if isinstance(kind, ir.RankedTensorType) else None


def _transposed(op: ir.Operation, loops: int) -> tuple[bool, bool] | None:
    """Whether ``A`` and ``B`` are read transposed (``[batch,] k, m`` / ``n, k``), or
    None where the maps are not a plain (batch) matmul's up to those transposes."""
    batch = list(range(loops - 3))
    m, n, k = loops - 3, loops - 2, loops - 1
    if "indexing_maps" not in op.attributes:
        return (False, False)
    maps = [
        [e.position if isinstance(e, ir.AffineDimExpr) else -1 for e in attr.value.results]
        for attr in op.attributes["indexing_maps"]
    ]
    if len(maps) != 3 or maps[2] != [*batch, m, n]:
        return None
    a = {(*batch, m, k): False, (*batch, k, m): True}.get(tuple(maps[0]))
    b = {(*batch, k, n): False, (*batch, n, k): True}.get(tuple(maps[1]))
    return None if a is None or b is None else (a, b)
