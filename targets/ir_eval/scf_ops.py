"""``scf`` loops and conditionals: ``for`` (with ``iter_args``), ``forall`` (with
``shared_outs`` and ``scf.forall.in_parallel``), ``if`` and ``execute_region``.

``scf.forall`` iterations run one after another in lexicographic order, and every iteration
sees the ``shared_outs`` as they were before the loop: what an iteration writes with
``tensor.parallel_insert_slice`` only appears in the loop's results. Two iterations writing
the same element is a race (the result would depend on thread order) and is an error.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import EvalError, OpFailure
from .interpreter import Env, Interpreter, OpTable, single_block
from .tensor_ops import insert_slice_into
from .values import Value, as_unsigned, index, merge_static_dynamic, storage_dtype

HANDLERS = OpTable()


@HANDLERS.register("scf.for")
def _for(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    read = as_unsigned if "unsignedCmp" in op.attributes else np.asarray
    lower, upper, step = (int(read(env[v])) for v in (op.lowerBound, op.upperBound, op.step))
    if step <= 0:
        raise OpFailure(f"step {step} is not positive")
    iv_dtype = storage_dtype(op.lowerBound.type)
    block = single_block(op.region)
    carried = env.values_of(op.initArgs)
    for iv in range(lower, upper, step):
        carried = interp.yielded(block, env, [np.asarray(iv).astype(iv_dtype)[()], *carried])
    return carried


@HANDLERS.register("scf.forall")
def _forall(interp: Interpreter, op: Any, env: Env) -> Sequence[Value]:
    lower = merge_static_dynamic(list(op.staticLowerBound), env.values_of(op.dynamicLowerBound))
    upper = merge_static_dynamic(list(op.staticUpperBound), env.values_of(op.dynamicUpperBound))
    steps = merge_static_dynamic(list(op.staticStep), env.values_of(op.dynamicStep))
    if min(steps, default=1) <= 0:
        raise OpFailure(f"steps {steps} are not all positive")
    shared = env.values_of(op.outputs)
    results = [np.array(value) for value in shared]
    written = [np.zeros(np.shape(value), dtype=bool) for value in shared]
    block = single_block(op.region)
    shared_args = {arg: k for k, arg in enumerate(list(block.arguments)[len(lower) :])}
    ranges = [range(lo, hi, st) for lo, hi, st in zip(lower, upper, steps, strict=True)]
    for ivs in itertools.product(*ranges):
        in_parallel = interp.run_block(block, env, [*(index(i) for i in ivs), *shared])
        for insert in single_block(in_parallel.regions[0]).operations:
            _parallel_insert(interp, insert, env, shared_args, results, written, ivs)
    return results


def _parallel_insert(
    interp: Interpreter,
    insert: Any,
    env: Env,
    shared_args: dict[Any, int],
    results: list[np.ndarray[Any, Any]],
    written: list[np.ndarray[Any, Any]],
    ivs: tuple[int, ...],
) -> None:
    """Apply one ``tensor.parallel_insert_slice`` of iteration ``ivs`` to the results."""
    if insert.operation.name != "tensor.parallel_insert_slice":
        raise interp.error(insert, "only tensor.parallel_insert_slice may appear in in_parallel")
    k = shared_args.get(insert.dest)
    if k is None:
        raise interp.error(insert, "the destination is not a shared_outs block argument")
    try:
        slices = insert_slice_into(results[k], insert, env)
    except EvalError:
        raise
    except (OpFailure, ValueError) as exc:
        raise interp.error(insert, f"iteration {list(ivs)}: {exc}") from None
    if written[k][slices].any():
        raise interp.error(
            insert,
            f"iteration {list(ivs)} writes elements of shared_outs #{k} that another "
            "iteration already wrote (a race: the result would depend on thread order)",
        )
    written[k][slices] = True


@HANDLERS.register("scf.if")
def _if(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    condition = env[op.condition]
    if np.ndim(condition) != 0:
        raise OpFailure("a condition that varies per element (inside a linalg body)")
    region = op.thenRegion if bool(condition) else op.elseRegion
    if not list(region.blocks):
        return []
    return interp.yielded(single_block(region), env, [])


@HANDLERS.register("scf.execute_region")
def _execute_region(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return interp.yielded(single_block(op.region), env, [])
