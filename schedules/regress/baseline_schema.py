"""JSON Schema of ``tdsched regress`` baseline files, from the field tables that validate
them when they load (:mod:`.baseline_file`), for editors and CI linting
(``tdsched schema --baseline``). Like the recipe schema it describes shapes; tdsched still
checks what needs the recipe (its parameters, its targets) when it loads an entry."""

from __future__ import annotations

from typing import Any

from tdsched.targets.target import TARGET_NAMES

from ..frontends.schema import closed_object
from .baseline_file import (
    CPU_EXPECTATION_FIELDS,
    ENTRY_FIELDS,
    FILE_FIELDS,
    FLOAT_SETTINGS,
    FRACTION_SETTINGS,
    NUMERICS_FIELDS,
    POSITIVE_SETTINGS,
    SETTINGS_FIELDS,
    Settings,
)

JSON = dict[str, Any]


def _setting(name: str) -> JSON:
    """One setting's type and range, as ``setting_problem`` checks them."""
    schema: JSON = {"type": "number" if name in FLOAT_SETTINGS else "integer"}
    if name in FRACTION_SETTINGS:
        schema |= {"minimum": 0, "exclusiveMaximum": 1}
    if name in POSITIVE_SETTINGS:
        schema["exclusiveMinimum"] = 0
    return schema | {"default": getattr(Settings(), name)}


def baseline_schema() -> JSON:
    """The JSON Schema (draft 2020-12) of a baseline file (YAML or JSON)."""
    settings = {name: _setting(name) for name in SETTINGS_FIELDS}
    scalar = {"type": ["integer", "number", "string"]}
    entry = closed_object(
        ENTRY_FIELDS,
        {
            "recipe": {"type": "string", "minLength": 1},
            "target": {"enum": list(TARGET_NAMES)},
            "params": {"type": "object", "additionalProperties": scalar},
            "cpu": {"type": "string", "minLength": 1},
            "gpu": {"type": "string", "minLength": 1},
            "expected_speedup": {"type": "number", "exclusiveMinimum": 0},
            "numerics": closed_object(
                NUMERICS_FIELDS,
                {
                    "atol": {"type": "number", "minimum": 0},
                    "rtol": {"type": "number", "minimum": 0},
                },
            ),
            "blessed": {"type": "object"},
            "by_cpu": {
                "type": "object",
                "additionalProperties": closed_object(
                    CPU_EXPECTATION_FIELDS,
                    {
                        "expected_speedup": {"type": "number", "exclusiveMinimum": 0},
                        "blessed": {"type": "object"},
                    },
                    required=("expected_speedup",),
                ),
            },
            "note": {"type": "string"},
            **settings,
        },
        required=("recipe",),
    )
    top = closed_object(
        FILE_FIELDS,
        {
            "defaults": closed_object(SETTINGS_FIELDS, settings),
            "entries": {"type": "array", "items": entry},
        },
        required=("entries",),
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tdsched regress baseline",
        **top,
    }
