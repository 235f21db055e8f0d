"""The dispatch census: the ops of every dispatch as IREE's kernel configs see them.

Kernel matchers can only test structure (op name, kind, loop bounds), and IREE rewrites
ops on the way to kernel configuration (unit dims dropped, convolutions generalized),
losing their discardable attributes. Their *locations* survive, so a model layer (whose
ops carry ``loc("<layer>")``) can still be traced to the op a kernel matcher would see.

A census compile stops after kernel configuration; its kernel library matches every
structured op and prints the op's dispatch function with debug locations. Each printed
function is then read back here (:func:`read_census`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import linalg, transform
from iree.compiler.passmanager import PassManager

from .generic_build import static_loop_ranges
from .graph.report import layer_of
from .op_body import body_of
from .payload import is_structured, ops_under
from .remarks import printed_sections
from .script import TransformScript, any_op

CENSUS_TITLE = "tdsched-census"
CENSUS_FLAGS: tuple[str, ...] = ("--compile-to=executable-configurations", "--mlir-print-debuginfo")
"""iree-compile flags of a census compile (with :func:`census_library` as the library)."""

_FUNCTION_NAME = re.compile(r'func\.func @(?:"([^"]*)"|([\w$.-]+))')
"""A function's name, quoted where it is not a bare identifier (``@"torch-jit-export"``)."""
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"(:\d+)?')


@dataclass(frozen=True)
class StructuredOp:
    """A structured (linalg) op of a function: in a census, a dispatch as kernel configs
    see it.

    ``layer`` comes from the op's ``tdsched.layer`` attribute or, where IREE dropped it,
    its location; ``loop_ranges`` is ``None`` when some loop bound is not static.
    """

    function: str
    op: str
    layer: str | None
    loop_ranges: tuple[int, ...] | None
    kind: str
    """What it computes (:func:`op_kind`): ``contraction``, ``convolution``, ``pooling``,
    ``reduction`` or ``elementwise``."""
    dtype: str | None
    """The element type of its first result (or output), e.g. ``f32``."""
    inputs: int | None = None
    """Its number of input operands (``ins``), a kernel match's ``inputs``."""
    used_by: str | None = None
    """The name of the one op that uses its first result (``None``: no use, or several),
    a kernel match's ``used_by``."""
    used_by_inputs: int | None = None
    """That op's number of input operands, where it is a structured op."""
    body: str | None = None
    """Its body where it is a ``linalg.generic`` (``op_body.body_of``), a kernel
    match's ``body``."""

    def describe(self) -> str:
        shape = list(self.loop_ranges) if self.loop_ranges is not None else "dynamic"
        return f"{self.op} {shape} in @{self.function}"


def census_library() -> str:
    """A kernel library that prints every dispatch holding a structured op, unchanged."""
    script = TransformScript()
    matcher = script.named_sequence("tdsched_census_match", arg_effect="readonly", num_results=1)
    with matcher.building():
        match = ir.Operation.create(
            "transform.match.structured", results=[], operands=[matcher.argument], regions=1
        )
        block = match.regions[0].blocks.append(any_op())
        with ir.InsertionPoint(block):
            ir.Operation.create("transform.match.structured.yield", operands=[])
    matcher.finish([matcher.argument])
    action = script.named_sequence("tdsched_census_print", arg_effect="readonly")
    with action.building():
        func = transform.GetParentOp(any_op(), action.argument, op_name="func.func").result
        transform.PrintOp(target=func, name=CENSUS_TITLE)
    action.finish()
    entry = script.named_sequence(
        "__kernel_config", arg_effect="consumed", num_results=1, result_effect="consumed"
    )
    with entry.building():
        updated = transform.ForeachMatchOp(
            any_op(),
            [],
            entry.argument,
            [],
            ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(matcher.name)]),
            ir.ArrayAttr.get([ir.FlatSymbolRefAttr.get(action.name)]),
        ).updated
        entry.op.operation.attributes["iree_codegen.tuning_spec_entrypoint"] = ir.UnitAttr.get()
    entry.finish([updated])
    return script.text()


def locate_layers(module_text: str) -> str:
    """``module_text`` printed with debug locations, every op carrying ``tdsched.layer``
    located at ``loc("<layer>")``: the input of a census compile (IREE keeps locations
    through the rewrites that drop attributes)."""
    with ir.Context():
        module = ir.Module.parse(module_text)
        for op in ops_under(module.operation, lambda op: layer_of(op) is not None):
            op.location = ir.Location.name(layer_of(op) or "")
        return str(module.operation.get_asm(enable_debug_info=True))


def read_census(output: str) -> list[StructuredOp]:
    """The structured ops of every dispatch function a census compile printed to ``output``.

    A function is printed once per structured op in it; each is read once.
    """
    found: list[StructuredOp] = []
    with ir.Context():
        for text in census_functions(output).values():
            found.extend(structured_ops(ir.Module.parse(text)))
    return found


def census_functions(output: str) -> dict[str, str]:
    """Each dispatch function a census compile printed to ``output``: its name (without
    ``@``) and its text, once each, in the order printed."""
    found: dict[str, str] = {}
    for title, body in printed_sections(output):
        if title == CENSUS_TITLE:
            name = _FUNCTION_NAME.search(body)
            if name is not None:
                found.setdefault(name.group(1) or name.group(2), body)
    return found


def structured_ops(module: ir.Module) -> list[StructuredOp]:
    """The structured ops of every function in ``module``, in order, with their layers
    and static loop ranges (named ops are generalized on a copy to read them)."""
    generalized = ir.Module.parse(str(module))
    PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(
        generalized.operation
    )
    found = []
    for func, general in zip(module.body.operations, generalized.body.operations, strict=True):
        if func.operation.name != "func.func":
            continue
        name = ir.StringAttr(func.operation.attributes["sym_name"]).value
        ops = ops_under(func.operation, is_structured)
        generics = ops_under(general.operation, is_structured)
        for op, generic in zip(ops, generics, strict=True):
            layer = layer_of(op) or layer_at(op.location)
            found.append(
                StructuredOp(
                    name,
                    op.name,
                    layer,
                    _ranges(generic),
                    op_kind(generic),
                    _dtype(op),
                    input_count(op),
                    *_single_user(op),
                    body_of(op),
                )
            )
    return found


def op_kind(generic: ir.Operation) -> str:
    """What a structured op computes, by linalg's own interfaces on its generic form
    (so a generalized matmul is still a contraction): ``contraction``, ``convolution``
    (``pooling`` where its window combines without multiplying: max, sum), ``reduction``
    (any other op with a reduction loop) or ``elementwise``."""
    if linalg.isa_contraction_op(generic):
        return "contraction"
    if linalg.isa_convolution_op(generic):
        body = generic.regions[0].blocks[0].operations
        multiplies = any(inner.operation.name in ("arith.mulf", "arith.muli") for inner in body)
        return "convolution" if multiplies else "pooling"
    attrs = generic.attributes
    if "iterator_types" in attrs and "reduction" in str(attrs["iterator_types"]):
        return "reduction"
    return "elementwise"


def input_count(op: ir.Operation) -> int:
    """How many of the structured ``op``'s operands are inputs (``ins``)."""
    return int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0])


def _single_user(op: ir.Operation) -> tuple[str | None, int | None]:
    """The name of the one op using ``op``'s first result and, where it is structured,
    its input count; ``None`` when there are no uses or several (as
    ``transform.match.structured.result ... single`` reads them)."""
    uses = list(op.results[0].uses) if op.results else []
    if len(uses) != 1:
        return None, None
    user = uses[0].owner
    return user.name, input_count(user) if is_structured(user) else None


def _dtype(op: ir.Operation) -> str | None:
    values = list(op.results) or list(op.operands)[-1:]
    if not values:
        return None
    shaped = values[0].type
    try:
        return str(ir.ShapedType(shaped).element_type)
    except ValueError:
        return str(shaped)


def _ranges(generic: ir.Operation) -> tuple[int, ...] | None:
    return static_loop_ranges(generic) if "iterator_types" in generic.attributes else None


def layer_at(location: ir.Location) -> str | None:
    """The first name in ``location`` (a NameLoc, possibly inside a call site or fusion):
    the layer the op was lowered from."""
    for quoted in _QUOTED.finditer(str(location)):
        if quoted.group(2) is None:  # "file":line:col is a file location, not a name
            return quoted.group(1)
    return None
