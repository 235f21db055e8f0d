"""The Vulkan schedule template of ``tdsched tune``: a lowering config for IREE's own
SPIR-V ``BaseVectorize`` pipeline, swept around IREE's choice.

It takes tasks whose root is a matmul or batch matmul, in any form (named, or a
``linalg.generic`` with either operand transposed): loops ``[B,] M, N, K`` in that order,
the output indexed ``[B,] M, N``, one input reading ``M`` and ``K`` (and ``B``), the other
``K`` and ``N`` (and ``B``). That covers the FFN's matmuls, and every convolution once
``conv1x1_to_matmul`` or ``im2col`` has rewritten it. Any epilogue: IREE's pipeline tiles
and fuses it itself. Per task:

* ``WM`` x ``WN``: the workgroup tile of the output (the batch tiled by 1), powers of two
  that divide the loop (or the loop itself, or IREE's own size) from a quarter to four
  times IREE's;
* ``RM`` x ``RN``: one thread's tile (:data:`THREAD_TILES`, and IREE's own), dividing
  the workgroup tile, at most :data:`MAX_THREAD_ELEMENTS` accumulators;
* ``TK``: the reduction loop's tile (:data:`REDUCTION_TILES` that divide it).

Where IREE did not vectorize the dispatch (it fell back to ``BaseDistribute``, as it does
for a loop such as ResNet's 7x7 = 49 output pixels, which no vector width divides), its
tiles are no kernel to centre on: the workgroup tiles then range from a quarter to four
times :data:`UNVECTORIZED_CENTRE`, the thread tiles start at the largest that divides
them. A loop with no power-of-two divisor of :data:`MIN_POW2_DIVISOR` or more (49, 147)
takes all its divisors as tiles, the small ones too (1, 7 and 49 for 49), so that such
a loop is tiled whole or in equal parts. On lavapipe such a config ran ResNet-50's
512x49x4608 matmul in 0.11 s where IREE's ``BaseDistribute`` kernel took 66 s.

The workgroup has ``WN/RN`` x ``WM/RM`` threads (the config derives it), at most
:data:`MAX_THREADS`. A kernel config reaches the root by kind and loop bounds
(``{kind: contraction, shape: [...]}``): on Vulkan a matmul is a ``linalg.generic`` by
the time kernel configs run. As on x86, every candidate is checked against IREE's
default build of the task.

Other contraction roots whose parallel loops come first and index the output in order,
each input read through plain loops (:func:`is_contraction_nest`), get the same config
with a tile per parallel loop of more than one iteration, named by its position (``W0``
x ``W1`` x ... a workgroup, ``R0`` x ``R1`` x ... a thread; a matmul IREE formed with its
operands swapped, a 1x1 convolution of stride 2, whose output rows and columns IREE
keeps as two loops), and ``TK`` on the innermost reduction loop of more than one
iteration (the others tiled by 1). IREE's contraction matcher would read such loops in
another order than theirs, or group several into one of its ``M``, ``N``, so the kernel
matches them by op name and loop bounds instead (``{op: linalg.generic, shape: [...]}``).
Where IREE did not vectorize, the two innermost tiled loops centre on
:data:`UNVECTORIZED_CENTRE` and the others on 1.
"""

from __future__ import annotations

import itertools
import math

from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp

from ..dsl.constraints import parse_constraint
from ..dsl.space import ParamValue
from .tasks import Task
from .templates import NoTemplate, Template, nearest, pow2_divisors

THREAD_TILES = (1, 2, 4, 8)
REDUCTION_TILES = (1, 2, 4, 8, 16, 32)
MAX_THREADS = 128
"""Threads per workgroup: the least every Vulkan device supports
(``maxComputeWorkGroupInvocations``)."""
MAX_THREAD_ELEMENTS = 64
"""Accumulators per thread (``RM * RN``): IREE's own largest thread tile is 8x8."""
VECTORIZING_PIPELINES = ("BaseVectorize", "MatmulPromoteVectorize", "CooperativeMatrixVectorize")
"""IREE's SPIR-V pipelines whose tiles are a vectorized kernel's, to centre the space on."""
UNVECTORIZED_CENTRE = 64
"""The workgroup tile the space centres on where IREE did not vectorize."""
MIN_POW2_DIVISOR = 4
"""A loop whose largest power-of-two divisor is smaller also takes its other divisors."""


def vulkan_template(task: Task, dispatch: ConfiguredDispatch) -> Template:
    """The Vulkan template for ``task``, whose standalone dispatch IREE configured as
    ``dispatch`` (its root carrying ``workgroup``/``thread``/``reduction`` levels).
    Raises :class:`NoTemplate` naming what does not fit."""
    root = dispatch.root_op
    parallel = root.iterators.count("parallel")
    if is_matmul(root):
        # named M and N, matched by kind: IREE's contraction matcher reads [B,] M, N, K
        tiled, reduced, by_kind = {parallel - 2: "M", parallel - 1: "N"}, parallel, True
    elif task.kind == "contraction" and is_contraction_nest(root):
        sizes = root.loop_ranges
        tiled = {loop: str(loop) for loop in range(parallel) if sizes[loop] > 1}
        reduced = max(
            (loop for loop in range(parallel, len(sizes)) if sizes[loop] > 1),
            default=len(sizes) - 1,
        )
        by_kind = False
    else:
        raise NoTemplate(_why_not(task.kind, root))
    return _config_template(dispatch, tiled, reduced, by_kind)


def _config_template(
    dispatch: ConfiguredDispatch, tiled: dict[int, str], reduced: int, by_kind: bool
) -> Template:
    """The config template of ``dispatch``'s root: for each parallel loop in ``tiled``
    (loop -> name) a workgroup tile ``W<name>`` and a thread tile ``R<name>``, the
    reduction loop ``reduced`` tiled by ``TK`` (other loops by 1; see the module
    docstring)."""
    root = dispatch.root_op
    sizes = root.loop_ranges
    none = (0,) * len(sizes)
    workgroup = root.levels.get("workgroup", none)
    thread = root.levels.get("thread", none)
    reduction = root.levels.get("reduction", none)
    vectorized = dispatch.pipeline is None or dispatch.pipeline in VECTORIZING_PIPELINES
    inner = sorted(tiled)[-2:]  # where IREE did not vectorize: a 2-D tile of the output
    space: dict[str, list[ParamValue]] = {}
    defaults: dict[str, ParamValue] = {}
    for loop, name in tiled.items():
        size = sizes[loop]
        divisors = _tile_divisors(size)
        own = (workgroup[loop] or size) if vectorized else None
        centre = own or (UNVECTORIZED_CENTRE if loop in inner else 1)
        candidates = sorted({*divisors, own}) if own else divisors
        tiles = _window(candidates, centre, size % MIN_POW2_DIVISOR == 0) or [
            nearest(divisors, centre)
        ]
        per_thread = {v for v in (*THREAD_TILES, *divisors) if v <= THREAD_TILES[-1]}
        if vectorized and thread[loop]:
            per_thread.add(thread[loop])
        thread_tiles = sorted(v for v in per_thread if size % v == 0)
        wanted = nearest(tiles, centre)
        space[f"W{name}"], space[f"R{name}"] = list(tiles), list(thread_tiles)
        defaults[f"W{name}"] = wanted
        defaults[f"R{name}"] = (
            nearest(thread_tiles, thread[loop] or 1)
            if vectorized
            else max(v for v in thread_tiles if wanted % v == 0)
        )
    tk = [v for v in REDUCTION_TILES if sizes[reduced] % v == 0]
    space["TK"], defaults["TK"] = list(tk), nearest(tk, reduction[reduced] or 4)
    parallel = root.iterators.count("parallel")
    config = {
        "pipeline": "BaseVectorize",
        "tile_sizes": {
            "workgroup": [f"${{W{tiled[i]}}}" if i in tiled else 1 for i in range(parallel)],
            "thread": [f"${{R{tiled[i]}}}" if i in tiled else 1 for i in range(parallel)],
            "reduction": [
                "${TK}" if i == reduced else (1 if i >= parallel else 0) for i in range(len(sizes))
            ],
        },
    }
    names = list(tiled.values())
    workgroups = " * ".join(f"W{n}" for n in names) or "1"
    threads = " * ".join(f"R{n}" for n in names) or "1"
    constraints = [
        *(f"W{n} % R{n} == 0" for n in names),
        f"{workgroups} <= {MAX_THREADS} * {threads}",
        f"{threads} <= {MAX_THREAD_ELEMENTS}",
    ]
    defaults.update(_nearest_valid(space, defaults, constraints, names))
    return Template(defaults, space, constraints, schedule=[], config=config, match_by_kind=by_kind)


def is_matmul(root: ConfiguredOp) -> bool:
    """Whether ``root`` is a matmul or batch matmul as the module docstring says: what
    IREE's contraction matcher reads as ``[B,] M, N, K`` in loop order."""
    parallel = len(root.loop_ranges) - 1
    if root.iterators != ("parallel",) * parallel + ("reduction",) or parallel not in (2, 3):
        return False
    if root.output_loops != tuple(range(parallel)) or len(root.input_loops) != 2:
        return False
    lhs, rhs = root.input_loops
    if lhs is None or rhs is None:
        return False
    k, m, n = parallel, parallel - 2, parallel - 1
    batch = set(range(parallel - 2))
    distinct = len(set(lhs)) == len(lhs) and len(set(rhs)) == len(rhs)
    return distinct and set(lhs) == {*batch, m, k} and set(rhs) == {*batch, k, n}


def is_contraction_nest(root: ConfiguredOp) -> bool:
    """Whether ``root`` is a contraction whose parallel loops come first and index its
    output in order, each input read through plain loops: a matmul with its operands
    swapped, or with several output loops on a side (a strided 1x1 convolution's output
    rows and columns), as IREE forms them."""
    parallel = root.iterators.count("parallel")
    if root.iterators != ("parallel",) * parallel + ("reduction",) * (
        len(root.iterators) - parallel
    ):
        return False
    if parallel == len(root.iterators) or root.output_loops != tuple(range(parallel)):
        return False
    reads = root.input_loops
    return len(reads) == 2 and all(loops is not None for loops in reads)


def _why_not(kind: str, root: ConfiguredOp) -> str:
    """Why a root that is no contraction the template takes keeps IREE's pipeline on
    Vulkan."""
    if "reduction" not in root.iterators:
        return f"{kind}: no reduction loop, IREE's pipeline is kept"
    if kind == "convolution":
        return (
            "convolution: on vulkan the template takes contraction roots; the "
            "conv1x1_to_matmul and im2col rewrites (raced first) make convolutions matmuls "
            "where they pay"
        )
    return (
        f"{kind}: on vulkan the template takes contraction roots whose parallel loops come "
        "first and index the output in order, each input read through plain loops"
    )


def _nearest_valid(
    space: dict[str, list[ParamValue]],
    wanted: dict[str, ParamValue],
    constraints: list[str],
    tiled: list[str],
) -> dict[str, ParamValue]:
    """The workgroup and thread tiles of ``space`` (``W<name>``, ``R<name>`` for each of
    ``tiled``) nearest ``wanted`` (in log2 steps) that meet ``constraints``, so that the
    recipe's defaults are a candidate (none: ``{}``)."""
    names = tuple(f"{level}{name}" for name in tiled for level in ("W", "R"))
    rules = [parse_constraint(text, frozenset(names)) for text in constraints]
    combos = [
        dict(zip(names, v, strict=True)) for v in itertools.product(*(space[n] for n in names))
    ]
    valid = [c for c in combos if all(rule.holds(c) for rule in rules)]

    def distance(combo: dict[str, ParamValue]) -> float:
        return sum(abs(math.log2(float(combo[n]) / float(wanted[n]))) for n in names)

    return min(valid, key=distance) if valid else {}


def _tile_divisors(size: int) -> list[int]:
    """The tiles of a ``size`` loop: its power-of-two divisors and itself, and all its
    divisors when its largest power-of-two divisor is below :data:`MIN_POW2_DIVISOR`."""
    if size % MIN_POW2_DIVISOR:
        return [v for v in range(1, size + 1) if size % v == 0]
    return pow2_divisors(size)


def _window(tiles: list[int], centre: int, floor: bool) -> list[int]:
    """The ``tiles`` up to four times ``centre``, and from a quarter of it with ``floor``
    (a loop that takes all its divisors keeps the small ones: 49 is tiled by 1, 7 or 49)."""
    return [v for v in tiles if (not floor or centre / 4 <= v) and v <= centre * 4]
