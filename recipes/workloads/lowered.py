"""Workloads lowered from models: the Python model builder, ONNX files and TOSA MLIR.

Every route ends in linalg on tensors whose ops carry ``tdsched.layer`` (see
``docs/importing.md``), so recipes can select them by layer. A builder model keeps its
numpy forward pass as the reference, whichever route lowers it; an ONNX file is checked
against onnx's reference evaluator of the model (:mod:`tdsched.recipes.lowering.onnx_reference`),
which catches an import bug; TOSA and linalg files against IREE's default build of the
same lowered module.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from iree.compiler import ir
from tdsched.recipes.lowering import (
    ONNX_REFERENCE,
    import_onnx,
    looks_like_tosa,
    lower_onnx,
    lower_tosa,
    tag_layers,
)
from tdsched.recipes.lowering.runtime_code import refuse_runtime_code
from tdsched.recipes.models import MODELS, Model, ModelError
from tdsched.recipes.workloads.user_code import user_code_failure
from tdsched.targets.workload import Workload, WorkloadError, read_text, workload_from_text

FileFormat = Literal["auto", "linalg", "tosa", "onnx"]
FILE_FORMATS: tuple[str, ...] = ("auto", "linalg", "tosa", "onnx")
Route = Literal["builder", "onnx"]
ROUTES: tuple[str, ...] = ("builder", "onnx")


def model_workload(
    model: str, args: dict[str, int | str], via: Route = "builder", base: Path | None = None
) -> Workload:
    """The builder model ``model`` lowered to linalg, by the builder or through ONNX.

    ``model`` is a shipped model name (see ``MODELS``) or ``FILE.py[:FUNCTION]`` (relative
    to ``base``; FUNCTION defaults to ``model``) whose function returns a ``Model``;
    ``args`` are its keyword arguments. ``via="onnx"`` exports the model to ONNX and lowers
    it with IREE's ONNX import; the reference is the builder's numpy forward pass either way.
    """
    built = build_model(model, args, base)
    exported = _exported(built)
    if via == "builder":
        return dataclasses.replace(built.workload(), onnx=exported)
    if via != "onnx":
        raise WorkloadError(f"unknown route {via!r}; use one of {', '.join(ROUTES)}")
    text = lower_onnx(built.to_onnx(), f"{built.name} (exported to ONNX)")
    workload = workload_from_text(text, built.name, built.name, None, built.reference)
    return dataclasses.replace(workload, onnx=exported)


def _exported(built: Model) -> Callable[[], bytes] | None:
    """The model exported to ONNX, made when asked (the onnxruntime peer); ``None`` for an
    NHWC model, which ONNX's ops cannot hold."""
    if built.layout != "NCHW":
        return None
    return lambda: bytes(built.to_onnx().SerializeToString())


def build_model(model: str, args: dict[str, int | str], base: Path | None = None) -> Model:
    """Call the model function ``model`` names (see :func:`model_workload`) with ``args``."""
    if model in MODELS:
        return _call(MODELS[model], model, args)
    path_text, _, function = model.partition(":")
    if not path_text.endswith(".py"):
        raise WorkloadError(
            f"unknown model {model!r}: give a shipped model ({', '.join(MODELS)}) or "
            "FILE.py[:FUNCTION] returning a tdsched Model"
        )
    path = (base / path_text) if base is not None else Path(path_text)
    built = _call(_load_function(path, function or "model"), f"{path}:{function or 'model'}", args)
    if not isinstance(built, Model):
        raise WorkloadError(
            f"{path}: {function or 'model'}() returned {type(built).__name__}, not a "
            "tdsched.recipes.models.Model"
        )
    return built


def _load_function(path: Path, function: str) -> object:
    if not path.is_file():
        raise WorkloadError(f"{path}: no such model file")
    spec = importlib.util.spec_from_file_location(f"tdsched_user_model_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise WorkloadError(user_code_failure(path, "loading the model file", exc)) from exc
    found = getattr(module, function, None)
    if not callable(found):
        defined = [n for n, v in vars(module).items() if inspect.isfunction(v)]
        raise WorkloadError(
            f"{path}: no function {function!r} (functions: {', '.join(defined) or 'none'}); "
            "name it as FILE.py:FUNCTION"
        )
    return found


def _call(function: object, what: str, args: dict[str, int | str]) -> Model:
    assert callable(function)
    try:
        inspect.signature(function).bind(**args)
    except TypeError as exc:
        expected = ", ".join(inspect.signature(function).parameters) or "none"
        raise WorkloadError(
            f"model {what}: bad arguments {sorted(args)}: {exc}; its arguments: {expected}"
        ) from exc
    try:
        built: Model = function(**args)
    except ModelError:
        raise
    except Exception as exc:
        raise WorkloadError(
            user_code_failure(Path(what.partition(":")[0]), "building", exc)
        ) from exc
    return built


def file_workload(path: Path, function: str | None = None, fmt: FileFormat = "auto") -> Workload:
    """A workload file lowered to linalg: ``.onnx`` (ONNX), ``.mlir`` holding TOSA ops
    (TOSA) or linalg on tensors; ``fmt`` overrides the guess."""
    fmt = _format_of(path, fmt)
    if fmt == "onnx":
        lowered = import_onnx(path, str(path))
        workload = workload_from_text(
            lowered.text, str(path), path.stem, function, lowered.reference, ONNX_REFERENCE
        )
        return dataclasses.replace(workload, onnx=path.read_bytes)
    text = read_text(path)
    if fmt == "tosa" or (fmt == "auto" and looks_like_tosa(text)):
        text = lower_tosa(text, str(path))
    else:
        text = checked_linalg(text, str(path))
    return workload_from_text(text, str(path), path.stem, function)


def _format_of(path: Path, fmt: FileFormat) -> FileFormat:
    if fmt not in FILE_FORMATS:
        raise WorkloadError(f"unknown format {fmt!r}; use one of {', '.join(FILE_FORMATS)}")
    if fmt == "auto" and path.suffix == ".onnx":
        return "onnx"
    if fmt == "auto" and path.suffix not in (".mlir", ".onnx"):
        raise WorkloadError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r}; "
            "give the format (linalg, tosa or onnx)"
        )
    return fmt


def checked_linalg(text: str, source: str) -> str:
    """A linalg module file's text, refused if it holds runtime code
    (:func:`~tdsched.recipes.lowering.runtime_code.refuse_runtime_code`), with
    ``tdsched.layer`` set from its ops' ``loc("name")`` locations where it has some."""
    with ir.Context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as exc:
            raise WorkloadError(f"{source}: not valid MLIR: {exc}") from exc
        refuse_runtime_code(module, source)
        if "loc(" not in text:
            return text
        tag_layers(module)
        return str(module)
