"""The typed Python API's keyword defaults are the step registry's: a method named after a
primitive gives each option the default its step class declares, so a recipe written in
Python and one written in YAML that leave an option out build the same schedule."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from tdsched.schedules.dsl.steps import STEPS
from tdsched.schedules.frontends import python_api

API_SPELLINGS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("producer", "name"): (None, "a fresh handle name"),
    ("match", "name"): (None, "a fresh handle name"),
    ("collapse_dims", "reassociation"): ("auto", None),
}
"""Options the API spells its own way: (method, option) → (API default, what it stands
for in the step). A fresh name is made when none is given; ``"auto"`` is the step's None."""


def _step_default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return "a fresh handle name"


def test_api_defaults_are_the_step_classes_defaults() -> None:
    checked = 0
    for owner in (python_api.OpRef, python_api.ScheduleBuilder):
        for method, fn in inspect.getmembers(owner, inspect.isfunction):
            if method not in STEPS:
                continue
            fields = {f.name: f for f in dataclasses.fields(STEPS[method].cls)}
            for option in inspect.signature(fn).parameters.values():
                if option.default is inspect.Parameter.empty or option.name not in fields:
                    continue
                step_default = _step_default(fields[option.name])
                got = (option.default, step_default)
                expected = API_SPELLINGS.get((method, option.name), (step_default, step_default))
                assert got == expected, f"{owner.__name__}.{method}({option.name}=...)"
                checked += 1
    assert checked >= 30  # the methods were found
