"""Transform-dialect scripts built with the MLIR Python bindings shipped in IREE.

A :class:`TransformScript` owns an MLIR context and a module tagged
``transform.with_named_sequence``. Named sequences are added with
:meth:`TransformScript.named_sequence`; primitives (``tdsched.transform_lib.*``) insert
transform ops at the current insertion point, so they must be called inside
``with seq.building():``. Handles are small typed wrappers over transform SSA values that
remember what the schedule knows about the payload (e.g. the loop count of the matched
op) so primitives can check their preconditions before IREE ever sees the script.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from iree.compiler import ir
from iree.compiler.dialects import transform

ArgEffect = Literal["consumed", "readonly"]


LoopKind = Literal["for", "forall"]
"""The loops tiling makes: ``scf.for`` or ``scf.forall``."""


@dataclass(frozen=True)
class OpHandle:
    """A transform handle to payload operations.

    ``what`` describes the payload for error messages (e.g. ``"linalg.matmul"``);
    ``num_loops`` is the loop count of the payload op when it is known, else ``None``.
    """

    value: ir.Value
    what: str
    num_loops: int | None = None

    def rebound(self, value: ir.Value) -> OpHandle:
        """The same payload op after a transform that replaced the handle."""
        return OpHandle(value, self.what, self.num_loops)


@dataclass(frozen=True)
class LoopHandle:
    """A transform handle to loops produced by tiling (``scf.for`` or ``scf.forall``)."""

    value: ir.Value
    kind: LoopKind
    what: str


def any_op() -> ir.Type:
    """The ``!transform.any_op`` type (needs an active context)."""
    return transform.AnyOpType.get()


def param_type(bits: int = 64) -> ir.Type:
    """The ``!transform.param<iN>`` type (needs an active context)."""
    return transform.ParamType.get(ir.IntegerType.get_signless(bits))


def create_op(
    name: str,
    operands: Sequence[ir.Value] = (),
    results: int = 0,
    attributes: dict[str, ir.Attribute] | None = None,
) -> ir.Operation:
    """Create a transform op that has no Python class (e.g. ``transform.iree.*``)."""
    return ir.Operation.create(
        name,
        results=[any_op()] * results,
        operands=list(operands),
        attributes=attributes or {},
    )


class NamedSequence:
    """One ``transform.named_sequence`` being built."""

    def __init__(self, script: TransformScript, op: transform.NamedSequenceOp) -> None:
        self.script = script
        self.op = op

    @property
    def name(self) -> str:
        return str(ir.StringAttr(self.op.attributes["sym_name"]).value)

    @property
    def argument(self) -> ir.Value:
        """The sequence's first block argument (the payload root it is applied to)."""
        return self.op.body.arguments[0]

    @contextmanager
    def building(self) -> Iterator[NamedSequence]:
        """Make this sequence's body the insertion point (before its terminator, if any)."""
        with self.script.context, ir.Location.unknown():
            ops = list(self.op.body.operations)
            if ops and ops[-1].operation.name == "transform.yield":
                ip = ir.InsertionPoint(ops[-1])
            else:
                ip = ir.InsertionPoint(self.op.body)
            with ip:
                yield self

    def finish(self, results: Sequence[ir.Value] = ()) -> None:
        """Terminate the body with ``transform.yield``."""
        with self.script.context, ir.Location.unknown(), ir.InsertionPoint(self.op.body):
            transform.YieldOp(list(results))


@contextmanager
def located(name: str, file: str | None, line: int | None) -> Iterator[None]:
    """Give the transform ops built inside the location of the recipe step that asked for
    them (``loc("tile"("recipe.yaml":27:1))``): IREE's diagnostics then name the step."""
    if file is None:
        with ir.Location.name(name):
            yield
        return
    with ir.Location.name(name, childLoc=ir.Location.file(file, line or 1, 1)):
        yield


_LOCAL = threading.local()


def _thread_context() -> ir.Context:
    """This thread's script context (MLIR contexts must not be shared across threads)."""
    if not hasattr(_LOCAL, "context"):
        _LOCAL.context = ir.Context()
    context: ir.Context = _LOCAL.context
    return context


class TransformScript:
    """A module of transform named sequences, printable as MLIR text."""

    def __init__(self, context: ir.Context | None = None) -> None:
        """A new script in ``context``, by default one context shared by the scripts this
        thread builds (creating an MLIR context registers every dialect: ~7 ms, which
        dominated planning a sweep's candidates)."""
        self.context = context or _thread_context()
        with self.context, ir.Location.unknown():
            self.module = ir.Module.create()
            self.module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()

    def named_sequence(
        self,
        name: str,
        *,
        arg_effect: ArgEffect,
        num_results: int = 0,
        result_effect: ArgEffect = "readonly",
    ) -> NamedSequence:
        """Append ``transform.named_sequence @name(%arg: !transform.any_op {effect})``."""
        with self.context, ir.Location.unknown(), ir.InsertionPoint(self.module.body):
            attr = {f"transform.{arg_effect}": ir.UnitAttr.get()}
            res_attrs = [{f"transform.{result_effect}": ir.UnitAttr.get()}] * num_results
            op = transform.NamedSequenceOp(
                name,
                [any_op()],
                [any_op()] * num_results,
                arg_attrs=[attr],
                res_attrs=res_attrs or None,
            )
        return NamedSequence(self, op)

    def text(self) -> str:
        """The script as MLIR text, with the recipe locations of its ops (verified first,
        so a broken script never escapes)."""
        with self.context:
            if not self.module.operation.verify():
                raise AssertionError("tdsched built a transform script that does not verify")
            return str(self.module.operation.get_asm(enable_debug_info=True))
