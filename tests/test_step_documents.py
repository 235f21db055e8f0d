"""Steps written back as recipe documents (``frontends/step_documents.py``) read back as
the same steps: every primitive, every option kind, op selections of every field."""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml
from tdsched.schedules.dsl.steps import STEPS, Step
from tdsched.schedules.dsl.values import MatchSpec
from tdsched.schedules.frontends.step_documents import match_document, step_document
from tdsched.schedules.frontends.yaml_frontend import parse_recipe
from tdsched.schedules.frontends.yaml_writer import recipe_yaml
from test_step_registry import ALL_STEPS

SELECTIONS = """\
name: selections
workload: {generator: matmul, args: {M: 64, N: 64, K: 64}}
parameters: {T: 8}
kernels:
  - name: mm
    match: {kind: contraction, shape: [64, 64, 64]}
    schedule:
      - match: {op: linalg.generic, inputs: 2, used_by: {op: linalg.generic, inputs: 1}, as: g}
      - match: {op: linalg.fill, dtype: f16, used_by: linalg.matmul, as: f}
      - match: {attributes: [tdsched.unit], layer: [stem, 'block*'], as: a}
      - match: {attributes: {tdsched.n: 3, tdsched.s: x}, layer: c1, as: b}
      - tile: {target: root, sizes: ['${T}', 8, 0], loop: forall, mapping: workgroup, when: "T > 4"}
      - vectorize: {}
"""


def _fields(step: Step) -> dict[str, Any]:
    return {f.name: getattr(step, f.name) for f in dataclasses.fields(step) if f.name != "where"}


def _round_trip(text: str) -> None:
    recipe = parse_recipe(text, "r.yaml")
    document = yaml.safe_load(text)
    if "graph" in document:
        document["graph"] = [step_document(s) for s in recipe.graph]
    for kernel, written in zip(recipe.kernels, document.get("kernels", []), strict=True):
        if "schedule" in written:
            written["schedule"] = [step_document(s) for s in kernel.steps]
    again = parse_recipe(recipe_yaml(document), "again.yaml")
    assert [_fields(s) for s in again.graph] == [_fields(s) for s in recipe.graph]
    for before, after in zip(recipe.kernels, again.kernels, strict=True):
        assert [_fields(s) for s in after.steps] == [_fields(s) for s in before.steps]


def test_every_primitive_reads_back_as_the_same_step() -> None:
    recipe = parse_recipe(ALL_STEPS, "r.yaml")
    written = {s.primitive for s in recipe.graph} | {
        s.primitive for k in recipe.kernels for s in k.steps
    }
    assert written == set(STEPS)
    _round_trip(ALL_STEPS)


def test_op_selections_and_conditions_read_back() -> None:
    _round_trip(SELECTIONS)


def test_defaults_are_left_out_and_a_selection_keeps_only_what_it_selects() -> None:
    recipe = parse_recipe(SELECTIONS, "r.yaml")
    assert step_document(recipe.kernels[0].steps[-1]) == {"vectorize": {}}
    assert match_document(MatchSpec(op="linalg.matmul")) == {"op": "linalg.matmul"}
    tile = step_document(recipe.kernels[0].steps[4])["tile"]
    assert tile["sizes"] == ["${T}", 8, 0] and tile["when"] == "T > 4"
