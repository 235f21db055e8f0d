"""The interpreter core: SSA environments, op dispatch, blocks and function calls.

Op semantics live in the ``*_ops`` modules, each an :class:`OpTable` from op name to a
:data:`Handler`. A handler gets the op (its generated op view, so ``op.static_offsets``
and similar accessors work) and the environment of the running function, and returns the
op's results in order. Ops with regions run their blocks through
:meth:`Interpreter.run_block`; a block's terminator is never dispatched, the op that owns
the region reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from iree.compiler import ir

from .errors import EvalError, OpFailure, describe_location
from .values import Value

Handler: TypeAlias = "Callable[[Interpreter, Any, Env], Sequence[Value]]"


class OpTable(dict[str, "Handler"]):
    """Handlers by op name, filled with :meth:`register`."""

    def register(self, *names: str) -> Callable[[Handler], Handler]:
        """Decorator: ``handler`` evaluates the ops called ``names``."""

        def add(handler: Handler) -> Handler:
            for name in names:
                self[name] = handler
            return handler

        return add


class Env:
    """The SSA values of one function activation, keyed by ``ir.Value`` (hashed by
    identity of the underlying value). Nested regions bind into the same environment.

    ``loop_indices`` holds the iteration indices (one per loop dimension) while a
    ``linalg.generic`` body runs, for ``linalg.index``; it is ``None`` elsewhere.
    """

    __slots__ = ("loop_indices", "values")

    def __init__(self) -> None:
        self.values: dict[ir.Value, Value] = {}
        self.loop_indices: list[Value] | None = None

    def __getitem__(self, value: ir.Value) -> Value:
        return self.values[value]

    def operands(self, op: Any) -> list[Value]:
        """The values of ``op``'s operands, in order."""
        return [self.values[v] for v in op.operands]

    def values_of(self, names: Iterable[ir.Value]) -> list[Value]:
        """The values bound to SSA ``names`` (an operand group such as ``op.offsets``)."""
        return [self.values[v] for v in names]

    def bind(self, names: Sequence[ir.Value], values: Sequence[Value]) -> None:
        """Bind SSA ``names`` (results or block arguments) to ``values``."""
        if len(names) != len(values):
            raise OpFailure(f"{len(values)} values for {len(names)} SSA names")
        for name, value in zip(names, values, strict=True):
            self.values[name] = value


@dataclass(frozen=True)
class _Step:
    handler: Handler
    op: Any
    results: tuple[ir.Value, ...]


@dataclass(frozen=True)
class _BlockPlan:
    arguments: tuple[ir.Value, ...]
    steps: tuple[_Step, ...]
    terminator: Any


class Interpreter:
    """Evaluates the functions of one parsed module with the given op handlers.

    ``source`` names the module in error messages (``source:line:col``).
    """

    def __init__(self, module: ir.Module, handlers: Mapping[str, Handler], source: str) -> None:
        self.source = source
        self._handlers = handlers
        self._functions: dict[str, Any] = {
            ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in module.body.operations
            if op.operation.name == "func.func"
        }
        self._plans: dict[ir.Block, _BlockPlan] = {}

    def function(self, name: str) -> Any:
        """The ``func.func`` called ``name``."""
        if name not in self._functions:
            found = ", ".join(f"@{n}" for n in self._functions) or "none"
            raise EvalError(f"{self.source}: no function @{name} (found: {found})")
        return self._functions[name]

    def call(self, name: str, args: Sequence[Value]) -> list[Value]:
        """Run function ``@name`` on ``args``; returns what its ``func.return`` returns."""
        fn = self.function(name)
        blocks = list(fn.regions[0].blocks)
        if len(blocks) != 1:
            raise self.error(
                fn, f"@{name} has {len(blocks)} blocks (one is supported: no declarations, no cf)"
            )
        return self.yielded(blocks[0], Env(), args)

    def run_block(self, block: ir.Block, env: Env, args: Sequence[Value]) -> Any:
        """Bind ``block``'s arguments to ``args`` and run its ops but the terminator, which
        is returned for the region's owner to read."""
        plan = self._plans.get(block)
        if plan is None:
            plan = self._plans[block] = self._plan(block)
        env.bind(plan.arguments, args)
        for step in plan.steps:
            try:
                values = step.handler(self, step.op, env)
                env.bind(step.results, values)
            except EvalError:
                raise
            except OpFailure as exc:
                raise self.error(step.op, str(exc)) from None
            except (ArithmeticError, IndexError, TypeError, ValueError) as exc:
                raise self.error(step.op, f"evaluation failed: {exc}") from exc
        return plan.terminator

    def yielded(self, block: ir.Block, env: Env, args: Sequence[Value]) -> list[Value]:
        """Run ``block`` and return its terminator's operands (what it yields)."""
        return env.operands(self.run_block(block, env, args))

    def error(self, op: Any, problem: str) -> EvalError:
        """An error about ``op``: ``source:line:col: op.name: problem``."""
        return EvalError(
            f"{describe_location(op.location, self.source)}: {op.operation.name}: {problem}"
        )

    def _plan(self, block: ir.Block) -> _BlockPlan:
        ops = list(block.operations)
        steps = []
        for op in ops[:-1]:
            handler = self._handlers.get(op.operation.name)
            if handler is None:
                raise self.error(op, f"unsupported op. {supported_summary(self._handlers)}")
            steps.append(_Step(handler, op, tuple(op.results)))
        return _BlockPlan(tuple(block.arguments), tuple(steps), ops[-1])


def single_block(region: ir.Region) -> ir.Block:
    """The only block of ``region`` (multi-block control flow is not supported)."""
    blocks = list(region.blocks)
    if len(blocks) != 1:
        raise OpFailure(f"regions with {len(blocks)} blocks are not supported (one block)")
    return blocks[0]


def supported_summary(handlers: Mapping[str, Handler]) -> str:
    """``Supported: arith.{addf, ...}; ...`` (grouped by dialect) for error messages."""
    by_dialect: dict[str, list[str]] = {}
    for name in sorted(handlers):
        dialect, _, rest = name.partition(".")
        by_dialect.setdefault(dialect, []).append(rest)
    groups = "; ".join(f"{d}.{{{', '.join(ops)}}}" for d, ops in by_dialect.items())
    return (
        f"Supported: {groups}; linalg named ops are generalized to linalg.generic first, "
        "and block terminators (yield, return, in_parallel) are read by their parent op"
    )


CORE_HANDLERS = OpTable()


@CORE_HANDLERS.register("func.call")
def _call(interp: Interpreter, op: Any, env: Env) -> list[Value]:
    return interp.call(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, env.operands(op))


def pure(fn: Callable[..., Value]) -> Handler:
    """A handler for a one-result op computed from its operand values alone."""

    def handler(interp: Interpreter, op: Any, env: Env) -> list[Value]:
        return [fn(*env.operands(op))]

    return handler
