"""Constraint expressions between parameters, parsed and evaluated without ``eval``.

A constraint is a Python-syntax boolean expression over parameter names, integer and
float literals, arithmetic (``+ - * / // % **``, unary ``-``), comparisons (chains
allowed; a string literal may be compared, ``LAYOUT == 'packed'``, but not computed
with), ``and`` / ``or`` / ``not``, parentheses and the functions ``min``, ``max``,
``abs``. Nothing else parses: no attribute access, calls to other names, subscripts or
lambdas, so a recipe cannot run code. :func:`parse_constraint` checks the
syntax and the names at load time; :meth:`Expression.holds` evaluates it for one
candidate.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Number = int | float
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
_MAX_EXPONENT = 64
MAX_LENGTH = 1000
"""The longest constraint, in characters: a real one fits on a line or two."""
MAX_DEPTH = 100
"""The deepest nesting of operations and parentheses a constraint may have (parsing
and evaluating recurse once per level)."""
ALLOWED = (
    "parameter names, numbers, + - * / // % **, comparisons (with numbers or 'strings'), "
    "and/or/not, parentheses, min(), max(), abs()"
)


class ConstraintError(ValueError):
    """A constraint does not parse, names an unknown parameter, or cannot be evaluated."""


@dataclass(frozen=True)
class Expression:
    """A parsed constraint: its text, the names it reads and its checked syntax tree."""

    text: str
    names: frozenset[str]
    tree: ast.expr

    def holds(self, values: Mapping[str, Number | str]) -> bool:
        """Whether the constraint is true for ``values``.

        Raises :class:`ConstraintError` when evaluation fails (division by zero, a
        string parameter in arithmetic, an exponent that is too large).
        """
        return bool(self.value(values))

    def value(self, values: Mapping[str, Number | str]) -> Any:
        """The expression's value for ``values`` (a number, or a bool for a comparison).

        Raises :class:`ConstraintError` as :meth:`holds` does.
        """
        try:
            return _evaluate(self.tree, values)
        except ZeroDivisionError as exc:
            raise ConstraintError(f"{self.text!r}: division by zero") from exc
        except TypeError as exc:
            raise ConstraintError(f"{self.text!r}: {exc}") from exc


def parse_constraint(text: str, known: set[str] | frozenset[str]) -> Expression:
    """Parse ``text``; every name must be in ``known`` (the recipe's parameters). An
    expression is parsed once per text and names (a sweep evaluates the same conditions
    for each of thousands of points)."""
    return _parse_once(text, frozenset(known))


@functools.lru_cache(maxsize=1024)
def _parse_once(text: str, known: frozenset[str]) -> Expression:
    if len(text) > MAX_LENGTH:
        raise ConstraintError(
            f"{text[:40]!r}... is {len(text)} characters; a constraint has at most "
            f"{MAX_LENGTH}: split it into several"
        )
    too_deep = f"{text!r} is nested more than {MAX_DEPTH} levels deep; write it flatter"
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ConstraintError(f"{text!r} is not a valid expression ({exc.msg})") from exc
    except (RecursionError, MemoryError):  # CPython's parser recurses once per level
        raise ConstraintError(too_deep) from None
    names: set[str] = set()
    _check(tree, text, names, too_deep)
    unknown = sorted(names - set(known))
    if unknown:
        raise ConstraintError(
            f"{text!r} names {', '.join(unknown)}, which "
            f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'}; "
            f"declared: {', '.join(sorted(known)) or 'none'}"
        )
    return Expression(text.strip(), frozenset(names), tree)


def _check(node: ast.AST, text: str, names: set[str], too_deep: str, depth: int = 0) -> None:
    """Refuse any syntax outside the small arithmetic language and nesting deeper than
    :data:`MAX_DEPTH` (``too_deep`` says so); collect names."""
    if depth > MAX_DEPTH:
        raise ConstraintError(too_deep)
    if isinstance(node, ast.Name):
        names.add(node.id)
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ConstraintError(
                f"{text!r}: only numeric literals are allowed here (a 'string' only as a "
                "side of a comparison, e.g. LAYOUT == 'packed')"
            )
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ConstraintError(
                f"{text!r}: only min(), max() and abs() may be called; allowed: {ALLOWED}"
            )
        if node.keywords or not node.args:
            raise ConstraintError(f"{text!r}: {node.func.id}() takes positional arguments")
        for arg in node.args:
            _check(arg, text, names, too_deep, depth + 1)
        return
    checks: list[ast.AST]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        checks = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
        checks = [node.operand]
    elif isinstance(node, ast.BoolOp):
        checks = list(node.values)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        checks = [side for side in (node.left, *node.comparators) if not _is_text(side)]
    else:
        raise ConstraintError(
            f"{text!r}: {type(node).__name__} is not allowed in a constraint; allowed: {ALLOWED}"
        )
    for child in checks:
        _check(child, text, names, too_deep, depth + 1)


def _is_text(node: ast.AST) -> bool:
    """A string literal, allowed as one side of a comparison."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _evaluate(node: ast.AST, values: Mapping[str, Number | str]) -> Any:
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise ConstraintError(f"{node.id} has no value here")
        return values[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        return _FUNCTIONS[node.func.id](*(_evaluate(a, values) for a in node.args))
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise TypeError(f"exponent {right} is larger than {_MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BoolOp):
        results = (_evaluate(v, values) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    assert isinstance(node, ast.Compare)
    left = _evaluate(node.left, values)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(comparator, values)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True
