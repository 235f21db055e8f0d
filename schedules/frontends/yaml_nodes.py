"""YAML nodes that remember where they came from, for files users write by hand.

A :class:`Node` wraps a PyYAML node with its ``file:line: field`` location; its
accessors validate the value and raise :class:`RecipeError` naming that location and
what is allowed. Recipes (:mod:`.yaml_frontend`) and regression baselines read through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import yaml

from ..base.errors import RecipeError, Where
from ..dsl.values import IntOrParam

T = TypeVar("T")
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's composer where PyYAML was built with it (14x faster on the shipped recipes,
the same nodes and marks), else PyYAML's own."""
MAX_DEPTH = 200
"""The most nested lists and mappings a file may hold (a recipe holds under ten)."""


def compose(text: str, filename: str, what: str = "YAML") -> yaml.Node | None:
    """The node tree of a hand-written file (``None`` when it is empty); text that is not
    valid ``what`` (YAML, or YAML/JSON) is a RecipeError naming the file and line, and so
    is one nested more than :data:`MAX_DEPTH` deep."""
    too_deep = RecipeError(
        Where(filename),
        f"not valid {what}: lists or mappings nested too deeply to read (hundreds of "
        "levels); a file needs a few",
    )
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        if "nesting depth" in problem:  # libyaml's own limit
            raise too_deep from None
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise RecipeError(Where(filename, line), f"not valid {what}: {problem}") from exc
    except RecursionError:  # PyYAML's composer recurses into nested collections
        raise too_deep from None
    if node is not None and _depth(node) > MAX_DEPTH:
        raise too_deep  # what reads the tree recurses too
    return node


def _depth(root: yaml.Node) -> int:
    """How deeply lists and mappings nest in ``root`` (a scalar: 0), without recursion."""
    deepest, stack = 0, [(root, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, yaml.SequenceNode):
            stack += [(item, depth + 1) for item in node.value]
        elif isinstance(node, yaml.MappingNode):
            stack += [(part, depth + 1) for pair in node.value for part in pair]
    return deepest


def construct(node: yaml.Node, where: Where) -> Any:
    """A scalar's Python value; tags outside YAML's safe schema are refused."""
    try:
        return _CONSTRUCTOR.construct_object(node)
    except yaml.YAMLError as exc:
        raise RecipeError(
            Where(where.file, node.start_mark.line + 1, where.field),
            f"unsupported YAML value ({getattr(exc, 'problem', exc)}); "
            "use plain scalars, lists and mappings",
        ) from exc


class Node:
    """A YAML node with its location; accessors validate and raise RecipeError."""

    def __init__(self, node: yaml.Node, where: Where) -> None:
        self.node = node
        self.where = where

    def fail(self, message: str) -> RecipeError:
        return RecipeError(self.where, message)

    def mapping(self, allowed: dict[str, str], required: tuple[str, ...] = ()) -> dict[str, Node]:
        """The mapping's fields; unknown or missing keys are errors listing ``allowed``."""
        if isinstance(self.node, yaml.ScalarNode) and self.node.tag.endswith(":null"):
            items: list[tuple[yaml.Node, yaml.Node]] = []
        elif isinstance(self.node, yaml.MappingNode):
            items = self.node.value
        else:
            raise self.fail(f"expected a mapping with keys {listing(allowed)}")
        fields: dict[str, Node] = {}
        for key_node, value_node in items:
            key = str(construct(key_node, self.where))
            line = key_node.start_mark.line + 1
            if key not in allowed:
                raise RecipeError(
                    self.where.child(key, line),
                    f"unknown field {key!r}; allowed here: {listing(allowed)}",
                )
            fields[key] = Node(value_node, self.where.child(key, line))
        for key in required:
            if key not in fields:
                raise self.fail(f"missing required field {key!r} ({allowed[key]})")
        return fields

    def entries(self, what: str) -> dict[str, Node]:
        """A mapping with free-form keys (``what`` describes it in the error)."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.fail(f"expected a mapping {what}")
        fields = {}
        for key_node, value_node in self.node.value:
            key = str(construct(key_node, self.where))
            fields[key] = Node(value_node, self.where.child(key, key_node.start_mark.line + 1))
        return fields

    def sequence(self) -> list[Node]:
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.fail("expected a list")
        return [
            Node(item, self.where.child(f"[{i}]", item.start_mark.line + 1))
            for i, item in enumerate(self.node.value)
        ]

    def scalar(self) -> Any:
        if not isinstance(self.node, yaml.ScalarNode):
            raise self.fail("expected a single value, not a list or mapping")
        return construct(self.node, self.where)

    def text(self) -> str:
        value = self.scalar()
        if not isinstance(value, str) or not value:
            raise self.fail(f"expected a non-empty string, got {value!r}")
        return value

    def choice(self, options: tuple[str, ...]) -> str:
        value = self.scalar()
        if value not in options:
            raise self.fail(f"got {value!r}; allowed: {', '.join(options)}")
        return str(value)

    def int_or_param(self) -> IntOrParam:
        value = self.scalar()
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise self.fail(f'expected an integer or a "${{PARAM}}" reference, got {value!r}')
        if isinstance(value, str) and not value.startswith("${"):
            raise self.fail(f'expected an integer or a "${{PARAM}}" reference, got {value!r}')
        return value

    def ints(self) -> tuple[IntOrParam, ...]:
        return tuple(item.int_or_param() for item in self.sequence())

    def integer(self) -> int:
        value = self.scalar()
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"expected an integer, got {value!r}")
        return value

    def number(self) -> float:
        value = self.scalar()
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"expected a number, got {value!r}")
        return float(value)

    def flag(self) -> bool:
        value = self.scalar()
        if not isinstance(value, bool):
            raise self.fail(f"expected true or false, got {value!r}")
        return value


def listing(allowed: dict[str, str]) -> str:
    return ", ".join(f"{k} ({v})" for k, v in allowed.items())


def optional(fields: dict[str, Node], key: str, read: Callable[[Node], T], default: T) -> T:
    return read(fields[key]) if key in fields else default
