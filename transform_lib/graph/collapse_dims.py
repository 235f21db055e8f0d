"""Graph rewrite collapse_dims: merge contiguous loops of ``linalg.generic`` ops.

A generic over ``N`` loops becomes a generic over fewer loops, one per group of a
reassociation such as ``[[0], [1], [2, 3]]``. Each operand is ``tensor.collapse_shape``d to
the collapsed domain, and each result is ``tensor.expand_shape``d back, so the rest of
the module is untouched. Broadcast operands (maps that skip loops) are collapsed too,
which upstream ``flatten_elementwise`` refuses, and ``reassociation: auto`` picks, per
op, the largest groups every operand allows. IREE's own collapse pass only runs inside
dispatch regions, so this one is written over the MLIR Python bindings.

A group of loops ``[a, ..., b]`` may be merged when the loops share one iterator type
and every operand's indexing map (a projected permutation) reads either none of them,
or all of them next to each other and in order. That holds for a group exactly when it
holds for each pair of neighbouring loops in it, which is what this module checks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from math import prod

from iree.compiler import ir
from iree.compiler.dialects import linalg, tensor

from ..match import OpCriteria
from ..payload import ops_under
from .report import GraphRewriteError, RewriteReport, describe_op, selected

PRIMITIVE = "collapse_dims"
GENERIC = "linalg.generic"

Groups = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class CollapseDimsOptions:
    """Which generics to collapse (``None``: all) and how (``None``: auto mode).

    ``reassociation`` lists groups of loop indices: contiguous, in order, covering
    every loop of each selected op, e.g. ``((0,), (1, 2))``.
    """

    ops: OpCriteria | None = None
    reassociation: Groups | None = None


@dataclass(frozen=True)
class _Generic:
    """The facts about one ``linalg.generic`` that collapsing needs."""

    op: ir.Operation
    maps: tuple[ir.AffineMap, ...]
    iterators: tuple[str, ...]

    @staticmethod
    def of(op: ir.Operation) -> _Generic:
        maps = tuple(
            ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])
        )
        iterators = tuple(
            str(t).rsplit("<", 1)[-1].rstrip(">")
            for t in ir.ArrayAttr(op.attributes["iterator_types"])
        )
        return _Generic(op, maps, iterators)

    def positions(self, operand: int) -> list[int]:
        """The loop read by each result of ``operand``'s map (maps are projected permutations)."""
        return [ir.AffineDimExpr(e).position for e in self.maps[operand].results]


def collapse_dims(module: ir.Module, options: CollapseDimsOptions) -> RewriteReport:
    """Collapse the loops of every selected ``linalg.generic`` in ``module``, in place.

    Explicit mode raises :class:`GraphRewriteError` on the first op the reassociation
    does not fit, before anything is rewritten. Auto mode lists ops it leaves alone (and
    why) in the report's details.
    """
    _check_selection(options.ops)
    plans: list[tuple[_Generic, Groups]] = []
    left: list[str] = []
    for op in _selected_generics(module, options.ops):
        generic = _Generic.of(op)
        groups = _plan(generic, options.reassociation)
        if isinstance(groups, str):
            left.append(f"{describe_op(op)}: left as is: {groups}")
        else:
            plans.append((generic, groups))
    details = [_describe_plan(g, groups) for g, groups in plans]
    for generic, groups in plans:
        _collapse(generic, groups)
    return _report(plans, tuple(details + left), any_selected=bool(plans or left))


def _check_selection(criteria: OpCriteria | None) -> None:
    if criteria is not None and criteria.op not in (None, GENERIC):
        raise GraphRewriteError(
            f"{PRIMITIVE}: selects linalg.generic ops, not {criteria.op}; generalize it first "
            "(generalize) or select {op: linalg.generic}"
        )


def _selected_generics(module: ir.Module, criteria: OpCriteria | None) -> list[ir.Operation]:
    return ops_under(module.operation, lambda op: op.name == GENERIC and selected(op, criteria))


def _plan(generic: _Generic, reassociation: Groups | None) -> Groups | str:
    """The groups to collapse ``generic`` by, or why it is left alone (auto mode only)."""
    refusal = _refusal(generic)
    if reassociation is None:
        if refusal is not None:
            return refusal
        groups = _maximal_groups(generic)
        if len(groups) == len(generic.iterators):
            why = "; ".join(_conflicts(generic)) or "it has fewer than two loops"
            return f"no neighbouring loops can be merged ({why})"
        return groups
    if refusal is not None:
        raise _error(generic, refusal)
    _check_groups(generic, reassociation)
    if len(reassociation) == len(generic.iterators):
        return "the reassociation keeps every loop"
    return reassociation


def _refusal(generic: _Generic) -> str | None:
    """Why ``generic`` cannot be collapsed at all, whatever the groups."""
    op = generic.op
    if not all(_static_or_scalar(v.type) for v in [*op.operands, *op.results]):
        return "its operands and results must be tensors of static shape (or scalars)"
    for k, m in enumerate(generic.maps):
        if not m.is_projected_permutation:
            return f"operand {k}'s map {_results(m)} is not a projected permutation"
    if ops_under(op, lambda inner: inner.name == "linalg.index"):
        return "its body uses linalg.index, which would need delinearizing"
    return None


def _static_or_scalar(t: ir.Type) -> bool:
    if isinstance(t, ir.RankedTensorType):
        return bool(t.has_static_shape)
    return not isinstance(t, ir.ShapedType)


def _results(m: ir.AffineMap) -> str:
    return "(" + ", ".join(str(e) for e in m.results) + ")"


def _pair_conflict(generic: _Generic, loop: int) -> str | None:
    """Why loops ``loop`` and ``loop + 1`` cannot be in one group (``None`` if they can)."""
    a, b = loop, loop + 1
    kinds = generic.iterators
    if kinds[a] != kinds[b]:
        return f"d{a} is {kinds[a]} but d{b} is {kinds[b]}"
    for k, m in enumerate(generic.maps):
        positions = generic.positions(k)
        reads = f"operand {k}'s map {_results(m)} reads"
        if (a in positions) != (b in positions):
            one, other = (a, b) if a in positions else (b, a)
            return f"{reads} d{one} but not d{other}"
        if a not in positions:
            continue
        pa, pb = positions.index(a), positions.index(b)
        if pb < pa:
            return f"{reads} d{a}, d{b} out of order"
        if pb != pa + 1:
            return f"{reads} d{a}, d{b} not next to each other"
    return None


def _conflicts(generic: _Generic) -> list[str]:
    found = (_pair_conflict(generic, d) for d in range(len(generic.iterators) - 1))
    return [c for c in found if c is not None]


def _maximal_groups(generic: _Generic) -> Groups:
    """Split the loops wherever two neighbours cannot be merged."""
    groups: list[list[int]] = []
    for d in range(len(generic.iterators)):
        if d and _pair_conflict(generic, d - 1) is None:
            groups[-1].append(d)
        else:
            groups.append([d])
    return tuple(tuple(g) for g in groups)


def _check_groups(generic: _Generic, groups: Groups) -> None:
    """Raise unless ``groups`` fits ``generic`` (see the module docstring)."""
    loops = len(generic.iterators)
    if any(not g for g in groups) or [d for g in groups for d in g] != list(range(loops)):
        raise _error(
            generic,
            f"reassociation {_show(groups)} must list its loops 0..{loops - 1} in order, "
            "each once, in non-empty groups",
        )
    for group in groups:
        for d in group[:-1]:
            conflict = _pair_conflict(generic, d)
            if conflict is not None:
                raise _error(generic, f"group {list(group)}: {conflict}")


def _error(generic: _Generic, condition: str) -> GraphRewriteError:
    return GraphRewriteError(
        f"{PRIMITIVE}: cannot collapse {describe_op(generic.op)}: {condition}; choose groups "
        "that fit every operand, use reassociation: auto, or narrow 'ops'"
    )


def _show(groups: Groups) -> str:
    return str([list(g) for g in groups])


def _describe_plan(generic: _Generic, groups: Groups) -> str:
    loops = len(generic.iterators)
    return f"{describe_op(generic.op)}: {_show(groups)} ({loops}→{len(groups)} dims)"


def _operand_groups(positions: list[int], group_of: list[int]) -> list[list[int]]:
    """Reassociation of an operand: its neighbouring dims that read loops of one group."""
    regrouped: list[list[int]] = []
    for i, loop in enumerate(positions):
        if i and group_of[positions[i - 1]] == group_of[loop]:
            regrouped[-1].append(i)
        else:
            regrouped.append([i])
    return regrouped


def _collapse(generic: _Generic, groups: Groups) -> None:
    """Replace ``generic`` by a generic over ``groups``, reshaping operands and results."""
    op = generic.op
    group_of = [g for g, group in enumerate(groups) for _ in group]
    positions = [generic.positions(k) for k in range(len(generic.maps))]
    reassociations = [_operand_groups(p, group_of) for p in positions]
    maps = [
        ir.AffineMapAttr.get(
            ir.AffineMap.get(
                len(groups), 0, [ir.AffineDimExpr.get(group_of[p[r[0]]]) for r in regroups]
            )
        )
        for p, regroups in zip(positions, reassociations, strict=True)
    ]
    iterators = ir.ArrayAttr(op.attributes["iterator_types"])
    num_inputs = len(op.operands) - len(op.results)
    with ir.InsertionPoint(op), op.location:
        operands = [_collapsed(v, r) for v, r in zip(op.operands, reassociations, strict=True)]
        new = linalg.GenericOp(
            [v.type for v in operands[num_inputs:]],
            operands[:num_inputs],
            operands[num_inputs:],
            ir.ArrayAttr.get(maps),
            ir.ArrayAttr.get([iterators[group[0]] for group in groups]),
        ).operation
        for name in op.attributes:
            if name not in new.attributes:
                new.attributes[name] = op.attributes[name]
        op.regions[0].blocks[0].append_to(new.regions[0])
        for old, result, regroups in zip(
            op.results, new.results, reassociations[num_inputs:], strict=True
        ):
            old.replace_all_uses_with(_expanded(result, regroups, old.type))
    op.erase()


def _collapsed(value: ir.Value, regroups: list[list[int]]) -> ir.Value:
    """``value`` with each of ``regroups``' dim groups collapsed into one dim."""
    if all(len(g) == 1 for g in regroups):
        return value
    source = ir.RankedTensorType(value.type)
    shape = [prod(source.shape[d] for d in g) for g in regroups]
    target = ir.RankedTensorType.get(shape, source.element_type)
    return tensor.CollapseShapeOp(target, value, regroups).result


def _expanded(value: ir.Value, regroups: list[list[int]], target: ir.Type) -> ir.Value:
    """``value`` expanded back to the static type ``target`` by ``regroups``."""
    if all(len(g) == 1 for g in regroups):
        return value
    shape = ir.RankedTensorType(target).shape
    return tensor.ExpandShapeOp(target, value, regroups, [], shape).result


def _report(
    plans: list[tuple[_Generic, Groups]], details: tuple[str, ...], *, any_selected: bool
) -> RewriteReport:
    if not plans:
        why = "no dims to collapse (see details)" if any_selected else "no linalg.generic selected"
        return RewriteReport(PRIMITIVE, f"changed nothing: {why}", False, details)
    counts = Counter((len(generic.iterators), len(groups)) for generic, groups in plans)
    parts = [
        f"{a}→{b}{' dims' if i == 0 else ''} on {n} op{'s' if n > 1 else ''}"
        for i, ((a, b), n) in enumerate(counts.items())
    ]
    return RewriteReport(PRIMITIVE, "collapsed " + ", ".join(parts), True, details)
