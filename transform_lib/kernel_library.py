"""An IREE kernel transform library: ``@__kernel_config`` plus one strategy per kernel.

Passed to iree-compile with ``--iree-codegen-transform-dialect-library``, the library's
``@__kernel_config`` runs once per dispatch function; its ``transform.foreach_match``
tries each kernel's matcher on the ops inside. The action of a match

* tags the matched root op with ``tdsched.kernel = "<name>"`` so the strategy finds it,
* attaches either a transform-dialect codegen strategy (``translation_info`` naming the
  strategy sequence) or a ``compilation_info`` (IREE's own pipeline with our config),
* emits the remark :func:`remarks.kernel_applied`, which tdsched requires after compiling.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import transform
from iree.compiler.dialects.transform import structured

from .errors import ScheduleError
from .match import OpCriteria, build_kernel_matcher, enclosing_function
from .payload import ops_under
from .remarks import emit_remark, kernel_applied
from .script import NamedSequence, OpHandle, TransformScript, any_op

KERNEL_ATTR = "tdsched.kernel"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
StrategyBody = Callable[[OpHandle, OpHandle], None]
"""Builds a strategy body from (root op handle, dispatch function handle)."""


def _symbol(kind: str, kernel: str) -> str:
    """The library's symbol of ``kind`` (match, apply, strategy) for ``kernel``."""
    return f"tdsched_{kind}_{kernel}"


_STRATEGY_SPEC = re.compile(r"codegen_spec\s*=\s*@" + _symbol("strategy", r"(\w+)"))


def attached_kernel(func: ir.Operation) -> str | None:
    """The kernel schedule a library attached to the dispatch function ``func``, read
    after kernel configuration (``--compile-to=executable-configurations``); ``None`` when
    IREE configured it itself.

    A strategy kernel names its sequence in the function's ``translation_info``; a config
    kernel is found by the tag on its root op (strategies tag theirs too, but IREE may
    rebuild that op on the way to configuration, losing the tag: seen on a fused 3x3
    convolution).
    """
    if "translation_info" in func.attributes:
        strategy = _STRATEGY_SPEC.search(str(func.attributes["translation_info"]))
        if strategy is not None:
            return strategy.group(1)
    tagged = ops_under(func, lambda op: KERNEL_ATTR in op.attributes)
    return ir.StringAttr(tagged[0].attributes[KERNEL_ATTR]).value if tagged else None


@dataclass(frozen=True)
class _Entry:
    matcher: str
    action: str


class KernelLibrary:
    """Builder for a kernel library module; call :meth:`text` once all kernels are added."""

    def __init__(self) -> None:
        self.script = TransformScript()
        self._entries: list[_Entry] = []
        self._names: set[str] = set()

    def add_strategy(
        self, kernel: str, criteria: OpCriteria, num_loops: int | None, body: StrategyBody
    ) -> None:
        """Add a kernel whose dispatches are compiled by a transform-dialect strategy.

        ``body`` receives the root op handle (tagged by the action) and the function
        handle; it must emit the whole strategy, codegen tail included.
        """
        self._check_new(kernel)
        strategy = self.script.named_sequence(_symbol("strategy", kernel), arg_effect="readonly")
        with strategy.building():
            # IREE hands the strategy the dispatch function or its enclosing module
            # depending on the backend; matching func.func (the walk includes the root)
            # gives the function either way.
            func_value = structured.MatchOp(any_op(), strategy.argument, ops=["func.func"]).result
            func = OpHandle(func_value, "func.func")
            tag = ir.DictAttr.get({KERNEL_ATTR: ir.StringAttr.get(kernel)})
            root_value = structured.MatchOp(any_op(), func.value, op_attrs=tag).result
            body(OpHandle(root_value, criteria.op or criteria.kind or "root", num_loops), func)
        strategy.finish()
        info = (
            "#iree_codegen.translation_info<pipeline = #iree_codegen.transform_dialect_codegen "
            f"codegen_spec = @{strategy.name}>"
        )
        self._add_entry(
            kernel,
            criteria,
            lambda root, func: self._annotate(func.value, "translation_info", info),
        )

    def add_config(
        self, kernel: str, criteria: OpCriteria, config: str, attribute: str = "compilation_info"
    ) -> None:
        """Add a kernel whose dispatches keep IREE's pipeline, with ``config`` set as the
        matched op's ``attribute``: ``compilation_info`` on a dispatch's root, or
        ``lowering_config`` on another op of a dispatch whose root is configured too."""
        self._check_new(kernel)
        self._add_entry(
            kernel, criteria, lambda root, func: self._annotate(root.value, attribute, config)
        )

    def text(self) -> str:
        """The library as MLIR text, ending with ``@__kernel_config``."""
        entry = self.script.named_sequence(
            "__kernel_config", arg_effect="consumed", num_results=1, result_effect="consumed"
        )
        with entry.building():
            matchers = ir.ArrayAttr.get(
                [ir.FlatSymbolRefAttr.get(e.matcher) for e in self._entries]
            )
            actions = ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(e.action) for e in self._entries])
            updated = transform.ForeachMatchOp(
                any_op(), [], entry.argument, [], matchers, actions
            ).updated
            entry.op.operation.attributes["iree_codegen.tuning_spec_entrypoint"] = ir.UnitAttr.get()
        entry.finish([updated])
        return self.script.text()

    def _check_new(self, kernel: str) -> None:
        if not _NAME.fullmatch(kernel):
            raise ScheduleError(
                f"kernel name {kernel!r} is not allowed: use letters, digits and _ "
                "(it names symbols in the kernel library)"
            )
        if kernel in self._names:
            raise ScheduleError(
                f"kernel schedule {kernel!r} is defined twice; names must be unique"
            )
        self._names.add(kernel)

    def _add_entry(self, kernel: str, criteria: OpCriteria, attach: StrategyBody) -> None:
        matcher = build_kernel_matcher(self.script, _symbol("match", kernel), criteria)
        action: NamedSequence = self.script.named_sequence(
            _symbol("apply", kernel), arg_effect="readonly"
        )
        with action.building():
            root = OpHandle(action.argument, "root")
            func = enclosing_function(root)
            tag = transform.ParamConstantOp(
                transform.AnyParamType.get(), ir.StringAttr.get(kernel)
            ).param
            transform.AnnotateOp(root.value, KERNEL_ATTR, param=tag)
            attach(root, func)
            emit_remark(root, kernel_applied(kernel))
        action.finish()
        self._entries.append(_Entry(matcher, action.name))

    @staticmethod
    def _annotate(target: ir.Value, name: str, attribute: str) -> None:
        """Set attribute ``name`` to ``attribute`` (MLIR text) on the payload ``target``;
        text IREE does not accept (a misspelled pipeline) raises a ScheduleError with
        IREE's reason (e.g. the pipelines it knows)."""
        try:
            value = ir.Attribute.parse(attribute)
        except ir.MLIRError as exc:
            reasons = [d.message for d in exc.error_diagnostics] or [str(exc)]
            raise ScheduleError(f"config: IREE does not accept it: {reasons[0]}") from exc
        param = transform.ParamConstantOp(transform.AnyParamType.get(), value).param
        transform.AnnotateOp(target, name, param=param)
