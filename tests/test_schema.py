"""The JSON Schema of recipe files (``tdsched schema``): every shipped recipe conforms,
and the mistakes the loader refuses are flagged by the schema too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.schema import recipe_schema

VALIDATOR = jsonschema.Draft202012Validator(recipe_schema())


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(recipe_schema())


@pytest.mark.parametrize("path", sorted(RECIPES_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_recipes_conform(path: Path) -> None:
    errors = [e.message for e in VALIDATOR.iter_errors(yaml.safe_load(path.read_text()))]
    assert not errors


MATMUL = """\
name: r
workload: {generator: matmul, args: {M: 64, N: 64, K: "${K}"}}
parameters: {K: 64}
kernels:
  - name: mm
    match: {kind: contraction}
    schedule:
      - tile: {sizes: [8, 8, 0], loop: forall, mapping: workgroup}
"""


@pytest.mark.parametrize(
    ("edit", "flagged"),
    [
        (("- tile:", "- tilee:"), "tilee"),
        (("loop: forall", "loop: fo"), "fo"),
        (("sizes: [8, 8, 0]", "sizez: [8, 8, 0]"), "sizez"),
        (("sizes: [8, 8, 0]", "sizes: [8, x, 0]"), "x"),
        (("match: {kind: contraction}", "match: {kind: conv}"), "conv"),
        (("name: r", "nme: r"), "nme"),
    ],
)
def test_mistakes_are_flagged(edit: tuple[str, str], flagged: str) -> None:
    assert not list(VALIDATOR.iter_errors(yaml.safe_load(MATMUL)))
    bad = yaml.safe_load(MATMUL.replace(*edit))
    assert list(VALIDATOR.iter_errors(bad)), f"{edit[1]!r} passed the schema"


def test_schema_command_writes_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "recipe.schema.json"
    subprocess.run(
        [sys.executable, "-m", "tdsched.schedules.cli", "schema", "-o", str(out)], check=True
    )
    assert json.loads(out.read_text()) == recipe_schema()
