"""A matmul task's first candidate: the shipped kernel for its shape.

``matmul_x86``'s shape table holds matmul kernels swept per shape, vector ISA, CPU model
and thread count: register tiles that fill the register file, the packed layout with
its per-ISA inner tiles (6x16 on AVX2, 16x32 or 8x32 on AVX-512), the unpack fused or in
a dispatch of its own, constant weights packed at compile time. A plain matmul task's
template (:func:`.templates.template_for`, with the packed layout of
:func:`.templates.with_packed_layout`) has the same parameters under other names.
:func:`seeded` makes the table's choice for the task (its M, N, K, whether its B is a
constant, the build's ISA, CPU and threads, as ``tdsched run matmul_x86`` would choose)
the template's defaults. A sweep evaluates its recipe's own values before any sampled
candidate (:mod:`..sweep.incumbent`), so tune starts each such task from the shipped
kernel, and keeps it unless IREE or another candidate beats it in the task's race.

The seed is left out, and the template keeps IREE's tiles as its defaults, where the
table's choice runs IREE's own pipeline, or its values break the template's constraints
(a register tile the template does not admit for the build, a tile that does not
divide the task's loops).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection

from tdsched.transform_lib.dispatch_config import ConfiguredDispatch

from ..compile.build_target import BuildTarget
from ..dsl.params import resolved_values
from ..dsl.recipe import Recipe
from ..dsl.space import ParamValue
from ..frontends.loading import load
from .templates import Template, conditions_hold

SHIPPED = "matmul_x86"
"""The shipped recipe whose table seeds matmul tasks."""

KERNEL_NAMES = {"TM": "W0", "TN": "W1", "TK": "TK", "RM": "RH", "RN": "RW", "RK": "RK"}
"""matmul_x86's row-major kernel parameters -> the template's: the workgroup tile (rows,
columns), the reduction tile, the register tile (rows, columns) and its k step."""

PACKED_NAMES = ("LAYOUT", "M0", "N0", "UNPACK")
"""The packed layout's parameters, named alike in both."""


@functools.cache
def _shipped() -> Recipe:
    """:data:`SHIPPED`, loaded once per process (a tune asks once per matmul task)."""
    return load(SHIPPED)


def seeded(
    template: Template,
    dispatch: ConfiguredDispatch,
    build: BuildTarget,
    constant_inputs: Collection[int] = (),
) -> Template:
    """``template`` with :data:`SHIPPED`'s kernel for the task as its defaults, when the
    task's root is a ``linalg.matmul`` whose template has the packed layout
    (``constant_inputs``: the root's inputs computed from constants; input 1, B, selects
    the table's constant-weights entries). Otherwise, or where the seed does not fit
    (see the module docstring), ``template`` unchanged."""
    root = dispatch.root_op
    names = {*KERNEL_NAMES.values(), *PACKED_NAMES}
    if root.op != "linalg.matmul" or not names <= template.parameters.keys():
        return template
    m, n, k = root.loop_ranges
    weights = "constant" if 1 in constant_inputs else "input"
    shape: dict[str, ParamValue] = {"M": m, "N": n, "K": k, "WEIGHTS": weights}
    values, choice = resolved_values(
        _shipped(), shape, build.cpu_threads, build.name, build.machine
    )
    if choice is None or choice.entry is None or choice.entry.iree_default:
        return template
    if values["LAYOUT"] == "packed":
        seed = {name: values[name] for name in PACKED_NAMES}
    else:
        seed = {mine: values[theirs] for theirs, mine in KERNEL_NAMES.items()}
        seed["LAYOUT"] = "rowmajor"
    parameters = {**template.parameters, **seed}
    if not conditions_hold(template.constraints, {**parameters, **build.build_values()}):
        return template
    space = {
        name: axis if name not in seed or seed[name] in axis else [*axis, seed[name]]
        for name, axis in template.space.items()
    }
    return dataclasses.replace(template, parameters=parameters, space=space)
