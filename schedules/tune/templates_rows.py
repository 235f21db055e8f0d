"""The row-reduction template of ``tdsched tune`` on x86: IREE's own CPU pipeline with
swept tile sizes, for a dispatch whose root reduces the innermost loop of its input (a
row sum, a layer norm's mean or variance) and whose ops after the root run over that
whole input again (``x - mean``, the normalization), as
docs/recipes.md#scheduling-a-row-reduction does by hand.

Such a dispatch is no fit for a kernel schedule: the ops after the root iterate over the
input's rows and columns, not over the root's output. The template is a ``config``
instead (as ``softmax_x86``'s kernels are):

* the root: ``WG`` rows per workgroup on its innermost parallel loop with more than one
  iteration, ``VR`` rows per vector tile (independent accumulators) and ``RV`` columns
  per vector of the reduction; its other parallel loops keep IREE's tile sizes;
* each op after it, a ``root: false`` config of its own: ``VR`` rows and ``IV``
  columns per vector (without one, IREE derives its tiles from the root's).

The space is centred on IREE's own tile sizes for the dispatch: the rows per workgroup
from a quarter to four times IREE's (powers of two that divide the loop), the vector
widths :data:`WIDTHS` up to the row's length. Ops before the root (a softmax's row max)
keep the tiles IREE derives. Every candidate is checked against IREE's default build of
the task, like every template's.
"""

from __future__ import annotations

from typing import Any

from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp

from ..dsl.space import ParamValue
from .templates import NoTemplate, Template, TemplateKernel, nearest, pow2_divisors

ROWS_PER_VECTOR = (1, 2, 4, 8)
WIDTHS = (8, 16, 32, 64)
"""Columns per vector: half, one, two and four AVX-512 registers of f32."""


def is_row_reduction(dispatch: ConfiguredDispatch) -> bool:
    """Whether the template fits ``dispatch``: its root's only reduction loop is its
    innermost, its output is indexed by the parallel loops in order, and one or more
    ops after it iterate over the root's whole loop nest, all loops parallel."""
    root = dispatch.root_op
    loops = len(root.loop_ranges)
    if root.iterators != ("parallel",) * (loops - 1) + ("reduction",):
        return False
    if root.output_loops != tuple(range(loops - 1)) or not dispatch.epilogue:
        return False
    return all(_over_rows(op, root) for op in dispatch.epilogue)


def row_reduction_template(dispatch: ConfiguredDispatch) -> Template:
    """The template of a row-reduction dispatch (see the module docstring). Raises
    :class:`NoTemplate` where :func:`is_row_reduction` does not hold or the rows are
    all one."""
    if not is_row_reduction(dispatch):
        raise NoTemplate("not a row reduction with ops over its rows after it")
    root = dispatch.root_op
    rows_at = _row_loop(root)
    if rows_at is None:
        raise NoTemplate("row reduction: every parallel loop of the root has one iteration")
    rows, columns = root.loop_ranges[rows_at], root.loop_ranges[-1]
    distribution = root.levels.get("distribution", (0,) * len(root.loop_ranges))
    vector = root.levels.get("vector_common_parallel", (0,) * len(root.loop_ranges))
    reduction = root.levels.get("vector_reduction", (0,) * len(root.loop_ranges))
    iree_rows = distribution[rows_at] or rows
    wg = [v for v in pow2_divisors(rows) if iree_rows / 4 <= v <= iree_rows * 4] or [rows]
    vr = [v for v in ROWS_PER_VECTOR if v <= rows]
    widths = [v for v in WIDTHS if v <= columns] or [columns]
    inner = _inner_width(dispatch.epilogue[0])
    space: dict[str, list[ParamValue]] = {"WG": list(wg), "VR": list(vr)}
    space |= {"RV": list(widths), "IV": list(widths)}
    parameters: dict[str, ParamValue] = {
        "WG": nearest(wg, iree_rows),
        "VR": nearest(vr, vector[rows_at] or 1),
        "RV": nearest(widths, reduction[-1] or 16),
        "IV": nearest(widths, inner or 16),
    }
    config = {
        "tile_sizes": {
            "workgroup": _on_rows(distribution, rows_at, "${WG}"),
            "vector": _on_rows(vector, rows_at, "${VR}"),
            "reduction": [0] * (len(root.loop_ranges) - 1) + ["${RV}"],
        }
    }
    after = [
        TemplateKernel(
            dispatch.root + 1 + index,
            f"after{index}" if len(dispatch.epilogue) > 1 else "after",
            {
                "root": False,
                "tile_sizes": {
                    "vector": _on_rows(vector, rows_at, "${VR}"),
                    "inner": [0] * (len(root.loop_ranges) - 1) + ["${IV}"],
                },
            },
        )
        for index in range(len(dispatch.epilogue))
    ]
    constraints = ["WG % VR == 0"]
    return Template(
        parameters, space, constraints, schedule=[], config=config, more_kernels=tuple(after)
    )


def _over_rows(op: ConfiguredOp, root: ConfiguredOp) -> bool:
    """Whether ``op`` iterates over ``root``'s whole loop nest, every loop parallel."""
    loops = len(root.loop_ranges)
    return (
        op.loop_ranges == root.loop_ranges
        and op.iterators == ("parallel",) * loops
        and op.output_loops == tuple(range(loops))
    )


def _row_loop(root: ConfiguredOp) -> int | None:
    """The innermost parallel loop of ``root`` with more than one iteration."""
    rows = [i for i in range(len(root.loop_ranges) - 1) if root.loop_ranges[i] > 1]
    return rows[-1] if rows else None


def _inner_width(op: ConfiguredOp) -> int | None:
    """IREE's vector width over the columns for an op after the root, where it set one."""
    inner = op.levels.get("vector_inner_parallel")
    return inner[-1] if inner else None


def _on_rows(sizes: tuple[int, ...], index: int, value: Any) -> list[Any]:
    """IREE's ``sizes`` of the parallel loops with ``value`` at ``index``, and 0 on the
    reduction loop (the last)."""
    tiled: list[Any] = list(sizes[:-1])
    tiled[index] = value
    return [*tiled, 0]
