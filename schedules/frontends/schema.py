"""JSON Schema of recipe files, generated from the tables that validate them.

Steps come from the step registry (:mod:`..dsl.steps`, every option with its kind, choices and
doc); the other keys from the YAML front end's field tables. Editors use it to complete
and check recipes as they are typed (``tdsched schema``, docs/commands/schema.md). The
schema describes shapes; what it cannot say (a tile size per loop of the payload, handles
bound before use) is checked when the recipe is loaded and planned.
"""

from __future__ import annotations

from typing import Any

from tdsched.targets.cpu_isa import ISAS
from tdsched.targets.target import TARGET_NAMES
from tdsched.transform_lib.match import OP_KINDS

from ..dsl.options import Kind, StepOption, step_options
from ..dsl.recipe import METRICS
from ..dsl.shape_table import ENTRY_OPTIONS, RULES
from ..dsl.steps import STEPS, StepInfo
from ..dsl.values import MATCH_FIELDS, OPS_FIELDS
from .yaml_frontend import (
    CONFIG_FIELDS,
    CONFIG_LEVELS,
    KERNEL_FIELDS,
    RECIPE_FIELDS,
    SHAPES_FIELDS,
    WORKLOAD_FIELDS,
)

JSON = dict[str, Any]

_PARAM: JSON = {"type": "string", "pattern": r"^\$\{[^{}]+\}$"}
_INT: JSON = {"anyOf": [{"type": "integer"}, _PARAM], "description": 'integer or "${PARAM}"'}
_INTS: JSON = {"type": "array", "items": _INT}
_TEXT: JSON = {"type": "string", "minLength": 1}
_STRINGS: JSON = {"type": "array", "items": {"type": "string"}}


def recipe_schema() -> JSON:
    """The JSON Schema (draft 2020-12) of a YAML recipe file."""
    steps = {"oneOf": [{"$ref": f"#/$defs/step_{p}"} for p in STEPS]}
    kernel = closed_object(
        KERNEL_FIELDS,
        {
            "name": _TEXT,
            "match": {"$ref": "#/$defs/match"},
            "schedule": {"type": "array", "items": {"$ref": "#/$defs/step"}},
            "config": closed_object(
                CONFIG_FIELDS,
                {
                    "tile_sizes": closed_object(
                        {level: "tile sizes of this level" for level in CONFIG_LEVELS},
                        {level: _INTS for level in CONFIG_LEVELS},
                    ),
                    "workgroup_size": _INTS,
                    "pipeline": _TEXT,
                    "root": {"type": "boolean"},
                },
                required=("tile_sizes",),
            ),
            "workgroup_size": _INTS,
            "targets": {"type": "array", "items": {"enum": list(TARGET_NAMES)}},
            "when": _TEXT,
        },
        required=("name", "match"),
    )
    scalar = {"type": ["integer", "number", "string"]}
    top = closed_object(
        RECIPE_FIELDS,
        {
            "name": _TEXT,
            "description": {"type": "string"},
            "workload": closed_object(
                WORKLOAD_FIELDS,
                {
                    "generator": _TEXT,
                    "model": _TEXT,
                    "args": {
                        "type": "object",
                        "additionalProperties": {"type": ["integer", "string"]},
                    },
                    "via": {"anyOf": [{"enum": ["builder", "onnx"]}, _PARAM]},
                    "file": _TEXT,
                    "format": {"anyOf": [{"enum": ["auto", "linalg", "tosa", "onnx"]}, _PARAM]},
                    "function": _TEXT,
                },
            ),
            "targets": {"type": "array", "minItems": 1, "items": {"enum": list(TARGET_NAMES)}},
            "parameters": {"type": "object", "additionalProperties": scalar},
            "tolerance": closed_object(
                {"atol": "absolute tolerance", "rtol": "relative tolerance"},
                {
                    "atol": {"type": "number", "minimum": 0},
                    "rtol": {"type": "number", "minimum": 0},
                },
            ),
            "graph": {"type": "array", "items": {"$ref": "#/$defs/step"}},
            "kernels": {"type": "array", "items": kernel},
            "baseline": closed_object(
                {"flags": "extra iree-compile flags"},
                {"flags": {"type": "array", "items": {"type": "string", "pattern": "^--"}}},
            ),
            "compile_flags": {"type": "array", "items": {"type": "string", "pattern": "^--"}},
            "metrics": {"type": "array", "items": {"enum": list(METRICS)}},
            "space": {"type": "object", "additionalProperties": _axis()},
            "constraints": {"type": "array", "items": {"type": "string"}},
            "shapes": closed_object(
                SHAPES_FIELDS,
                {
                    "key": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    "rule": {"enum": list(RULES)},
                    "entries": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "description": "key values (integers; strings for a string "
                            "key), tuned parameter values, "
                            + "; ".join(f"{k}: {v}" for k, v in ENTRY_OPTIONS.items()),
                            "properties": {
                                "iree_default": {"type": "boolean"},
                                "threads": {"type": "integer", "minimum": 1},
                                "isa": {"enum": list(ISAS)},
                                "cpu": {"type": "string", "minLength": 1},
                                "gpu": {"type": "string", "minLength": 1},
                                "note": {"type": "string"},
                            },
                            "additionalProperties": scalar,
                        },
                    },
                },
                required=("key", "entries"),
            ),
            "provenance": {"type": "object"},
        },
        required=("name", "workload"),
    )
    defs: JSON = {
        "match": _selection(MATCH_FIELDS),
        "ops": _selection(OPS_FIELDS),
        "step": steps,
    }
    defs |= {f"step_{p}": _step(info) for p, info in STEPS.items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tdsched recipe",
        **top,
        "$defs": defs,
    }


def closed_object(
    docs: dict[str, str], properties: dict[str, JSON], required: tuple[str, ...] = ()
) -> JSON:
    """A closed object whose keys are exactly ``docs``'s (a key without a type fails)."""
    missing = set(docs) ^ set(properties)
    assert not missing, f"schema and field table disagree on {sorted(missing)}"
    props = {key: {**properties[key], "description": doc} for key, doc in docs.items()}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        **({"required": list(required)} if required else {}),
    }


def _selection(fields: dict[str, str]) -> JSON:
    every: dict[str, JSON] = {
        "op": _TEXT,
        "kind": {"enum": list(OP_KINDS)},
        "shape": _INTS,
        "dtype": _TEXT,
        "inputs": {"type": "integer", "minimum": 0},
        "used_by": {
            "anyOf": [
                _TEXT,
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["op"],
                    "properties": {"op": _TEXT, "inputs": {"type": "integer", "minimum": 0}},
                },
            ]
        },
        "body": _TEXT,
        "attributes": {
            "anyOf": [
                _STRINGS,
                {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "boolean", "number"]},
                },
            ]
        },
        "layer": {"anyOf": [_TEXT, _STRINGS]},
    }
    schema = closed_object(fields, {key: every[key] for key in fields})
    if "kind" in fields:
        schema["anyOf"] = _SELECTS
    return schema


_SELECTS = [{"required": [key]} for key in ("op", "kind", "layer", "attributes")]
"""A selection names at least one of these (dtype alone selects nothing)."""


def _axis() -> JSON:
    values = {"type": "array", "items": {"type": ["integer", "number", "string"]}}
    ranges = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "from": {"type": "integer"},
            "to": {"type": "integer"},
            "step": {"type": "integer"},
            "pow2": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        },
    }
    return {"anyOf": [values, ranges]}


def _step(info: StepInfo) -> JSON:
    """``{primitive: {options}}`` for one registered step."""
    docs: dict[str, str] = {}
    props: dict[str, JSON] = {}
    for opt in step_options(info.cls):
        if opt.spec.inline:
            docs |= MATCH_FIELDS
            props |= _selection(MATCH_FIELDS)["properties"]
        else:
            docs[opt.key] = opt.spec.doc
            props[opt.key] = _option(opt)
    required = tuple(o.key for o in step_options(info.cls) if o.required and not o.spec.inline)
    body = closed_object(docs, props, required)
    if any(o.spec.inline for o in step_options(info.cls)):
        body["anyOf"] = _SELECTS
    return {
        "type": "object",
        "description": f"{info.summary} ({info.scope.value})",
        "additionalProperties": False,
        "required": [info.primitive],
        "properties": {info.primitive: body},
    }


def _option(opt: StepOption) -> JSON:
    kind = opt.spec.kind
    schemas: dict[Kind, JSON] = {
        Kind.HANDLE: _TEXT,
        Kind.CONDITION: _TEXT,
        Kind.INT: _INT,
        Kind.INTS: _INTS,
        Kind.INT_GROUPS: {"anyOf": [{"const": "auto"}, {"type": "array", "items": _INTS}]},
        Kind.FLAG: {"type": "boolean"},
        Kind.CHOICE: {"enum": list(opt.spec.choices)},
        Kind.MATCH: {"$ref": "#/$defs/match"},
        Kind.OPS: {"$ref": "#/$defs/ops"},
    }
    schema = dict(schemas[kind])
    if not opt.required and opt.default is not None:
        schema["default"] = opt.default
    return schema
