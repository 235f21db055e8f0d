"""The workload model, ``.mlir`` file loading and seeded random inputs.

A :class:`Workload` is what targets compile, run and check. It lives in targets, the
lowest layer that needs it, so the recipes that generate workloads
(:mod:`tdsched.recipes.workloads`) and the targets that check them share one definition.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from iree.compiler import ir
from iree.compiler.dialects import func

from .matmul_peer import matmul_peer
from .random_data import NUMPY_DTYPES, random_arrays

Reference = Callable[[Sequence[np.ndarray]], list[np.ndarray]]
NUMPY_REFERENCE = "numpy"
"""The kind of a reference written in numpy (a generator's, a model builder's)."""


class WorkloadError(ValueError):
    """A workload cannot be built or loaded; the message says why and what to change."""


class DynamicShapeError(WorkloadError):
    """The entry function has dynamic dims and no extent was given for them."""


@dataclass(frozen=True)
class Workload:
    """A linalg-on-tensors module and its entry ``function``.

    ``reference`` computes the expected outputs in numpy; ``reference_kind`` names it
    (``numpy``: the generator's or model builder's numpy; ``onnx-reference``: onnx's
    reference evaluator of an ONNX file). When it is ``None`` (an MLIR or TOSA file), the
    untransformed module compiled by IREE's default pipeline is the reference.
    ``peer`` is what a user would call instead of compiling the workload, at its own
    dtype (numpy's ``a @ b`` on OpenBLAS for a matmul): ``tdsched run --peers`` times it
    as the ``numpy`` peer. A workload file that is one matmul gets ``a @ b``
    (:mod:`.matmul_peer`). ``None`` where numpy has no equivalent a user would pick.
    ``onnx`` gives the workload as an ONNX model's bytes, where a user would run that with
    onnxruntime instead (an ONNX file; a builder model, exported): ``tdsched run --peers``
    times it as the ``onnxruntime`` peer. It takes the model's inputs in the function's
    argument order and returns its outputs in the function's result order.
    """

    name: str
    mlir: str
    function: str
    reference: Reference | None = None
    peer: Reference | None = None
    reference_kind: str = NUMPY_REFERENCE
    onnx: Callable[[], bytes] | None = None


def load_mlir_file(path: str | Path, function: str | None = None) -> Workload:
    """Load a linalg-on-tensors ``.mlir`` file; ``function`` defaults to its only public
    ``func.func``."""
    path = Path(path)
    return workload_from_text(read_text(path), str(path), path.stem, function)


def read_text(path: Path) -> str:
    """The text of a workload file, or a WorkloadError naming it."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not a text file"
        raise WorkloadError(f"{path}: cannot read workload: {reason}") from exc


def workload_from_text(
    text: str,
    source: str,
    name: str,
    function: str | None = None,
    reference: Reference | None = None,
    reference_kind: str = NUMPY_REFERENCE,
) -> Workload:
    """A workload from module ``text`` (``source`` names it in errors): checks that it
    parses and that ``function`` (default: the only public one) exists."""
    with ir.Context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as exc:
            raise WorkloadError(f"{source}: not valid MLIR: {exc}") from exc
        functions = {_func_name(op): op for op in _public_functions(module)}
        names = list(functions)
        if function is None:
            if len(names) != 1:
                raise WorkloadError(
                    f"{source}: {len(names)} public functions ({', '.join(names) or 'none'}); "
                    "name the entry with workload.function"
                )
            function = names[0]
        elif function not in names:
            found = ", ".join(names)
            raise WorkloadError(f"{source}: no public function @{function} (found: {found})")
        peer = matmul_peer(functions[function].operation)
    return Workload(name, text, function, reference, peer, reference_kind)


def _public_functions(module: ir.Module) -> list[func.FuncOp]:
    found = []
    for op in module.body.operations:
        if op.operation.name == "func.func":
            attrs = op.operation.attributes
            if (
                "sym_visibility" not in attrs
                or ir.StringAttr(attrs["sym_visibility"]).value == "public"
            ):
                found.append(op)
    return found


def _func_name(op: func.FuncOp) -> str:
    return str(ir.StringAttr(op.operation.attributes["sym_name"]).value)


def input_types(
    workload: Workload, shapes: Sequence[tuple[int, ...]] | None = None
) -> list[tuple[tuple[int, ...], str]]:
    """Shapes and element types (``f32``, ...) of the entry function's arguments.

    ``shapes``: the shape of each argument, for an entry function with dynamic dims
    (evaluating a dynamic-shaped module); without it a dynamic dim, of an argument or a
    result, is a :class:`DynamicShapeError`.
    """
    with ir.Context():
        ftype = _entry_type(workload)
        types = _static(workload, ftype.inputs, "argument", shapes)
        if shapes is None:
            _static(workload, ftype.results, "result")  # static too, or the error
        return types


def _signature(
    workload: Workload,
) -> tuple[list[tuple[tuple[int, ...], str]], list[tuple[tuple[int, ...], str]]]:
    """Shapes and element types of the entry function's arguments and results."""
    with ir.Context():
        ftype = _entry_type(workload)
        return _static(workload, ftype.inputs, "argument"), _static(
            workload, ftype.results, "result"
        )


def _entry_type(workload: Workload) -> Any:
    """The entry function's ``ir.FunctionType`` (in the current context)."""
    module = ir.Module.parse(workload.mlir)
    entry = next(f for f in _public_functions(module) if _func_name(f) == workload.function)
    return ir.FunctionType(ir.TypeAttr(entry.operation.attributes["function_type"]).value)


def _static(
    workload: Workload, types: Any, what: str, shapes: Sequence[tuple[int, ...]] | None = None
) -> list[tuple[tuple[int, ...], str]]:
    result = []
    for i, t in enumerate(types):
        if not isinstance(t, ir.RankedTensorType):
            raise WorkloadError(
                f"{workload.name}: {what} type {t} is not a ranked tensor; "
                "tdsched feeds static-shaped tensors"
            )
        if not t.has_static_shape and shapes is None:
            raise DynamicShapeError(
                f"{workload.name}: {what} {t} has dynamic dims; running and timing need "
                "static shapes, while 'tdsched apply' prints a graph schedule's result on "
                "it and 'tdsched check --dynamic-size N' checks that result"
            )
        shape = tuple(t.shape) if shapes is None else tuple(shapes[i])
        result.append((shape, str(t.element_type)))
    return result


HOST_MEMORY_FRACTION = 0.8
"""A workload whose estimated footprint exceeds this share of the machine's memory is
refused before anything is compiled or allocated."""


def _sizes(workload: Workload) -> list[tuple[int, int]]:
    """(elements, bytes per element) of every argument and result of the entry function."""
    inputs, results = _signature(workload)
    return [
        (math.prod(shape), np.dtype(NUMPY_DTYPES.get(elem, np.float64)).itemsize)
        for shape, elem in (*inputs, *results)
    ]


def memory_estimate(workload: Workload) -> int:
    """Rough bytes a check and timing of ``workload`` needs: every argument and result
    held on the host and on the device in its own type, plus float64 temporaries (random
    generation, numpy references)."""
    return sum(elements * (2 * itemsize + 8) for elements, itemsize in _sizes(workload))


def traffic_bytes(workload: Workload) -> int:
    """Compulsory memory traffic of one call: every argument read once and every result
    written once, in its own element type (the least any schedule must move)."""
    return sum(elements * itemsize for elements, itemsize in _sizes(workload))


def check_memory(workload: Workload, available: int | None = None) -> None:
    """Refuse a workload too large for this machine, with the figures, before anything
    is compiled or allocated (``available``: bytes of memory, default this machine's)."""
    if available is None:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        needed = memory_estimate(workload)
    except DynamicShapeError:
        return  # its size is not known until it runs, which needs static shapes
    if needed > HOST_MEMORY_FRACTION * available:
        raise WorkloadError(
            f"{workload.name}: its tensors need about {_size(needed)} (arguments and results on "
            f"the host and device, plus float64 temporaries); this machine has "
            f"{_size(available)}: use smaller sizes"
        )


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def random_inputs(
    workload: Workload, seed: int = 0, shapes: Sequence[tuple[int, ...]] | None = None
) -> list[np.ndarray]:
    """Seeded random inputs for the entry function (:func:`.random_data.random_arrays`:
    uniform in [-1, 1) for floats); ``shapes``: see :func:`input_types`."""
    types = input_types(workload, shapes)
    for _, elem in types:
        if elem not in NUMPY_DTYPES:
            raise WorkloadError(f"{workload.name}: unsupported element type {elem}")
    return random_arrays(types, seed)
