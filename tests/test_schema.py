"""The JSON Schemas of recipe and baseline files (``tdsched schema [--baseline]``): every
shipped recipe and the CI baseline conform, and the mistakes the loaders refuse are flagged
by the schemas too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.frontends.schema import recipe_schema
from tdsched.schedules.regress.baseline_file import load_baseline
from tdsched.schedules.regress.baseline_schema import baseline_schema

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


@pytest.mark.process
def test_schema_command_writes_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "recipe.schema.json"
    subprocess.run(
        [sys.executable, "-m", "tdsched.schedules.cli.main", "schema", "-o", str(out)], check=True
    )
    assert json.loads(out.read_text()) == recipe_schema()


BASELINE = """\
defaults: {tolerance: 0.4, threads: 1}
entries:
- recipe: matmul_x86
  target: x86
  params: {M: 256}
  expected_speedup: 1.1
  numerics: {atol: 0.001}
"""
BASELINE_VALIDATOR = jsonschema.Draft202012Validator(baseline_schema())


def test_the_baseline_schema_takes_the_ci_baseline() -> None:
    jsonschema.Draft202012Validator.check_schema(baseline_schema())
    ci = Path(__file__).parent / "perf" / "ci_baseline.yaml"
    assert not list(BASELINE_VALIDATOR.iter_errors(yaml.safe_load(ci.read_text())))
    assert not list(BASELINE_VALIDATOR.iter_errors(yaml.safe_load(BASELINE)))


@pytest.mark.parametrize(
    "edit",
    [
        ("threads: 1", "threads: 0"),
        ("tolerance: 0.4", "tolerance: 1.5"),
        ("threads: 1", "threads: 1.5"),
        ("expected_speedup: 1.1", "expected_speedup: -1"),
        ("target: x86", "target: cuda"),
        ("params: {M: 256}", "parms: {M: 256}"),
        ("- recipe: matmul_x86", "- recipee: matmul_x86"),
        ("atol: 0.001", "atl: 0.001"),
    ],
)
def test_baseline_mistakes_are_flagged_by_the_schema_and_the_loader(
    edit: tuple[str, str], tmp_path: Path
) -> None:
    text = BASELINE.replace(*edit)
    assert list(BASELINE_VALIDATOR.iter_errors(yaml.safe_load(text))), f"{edit[1]!r} passed"
    path = tmp_path / "perf.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError, match=r"perf\.yaml:\d+"):
        load_baseline(path)


@pytest.mark.process
def test_schema_command_writes_the_baseline_schema(tmp_path: Path) -> None:
    out = tmp_path / "baseline.schema.json"
    command = [sys.executable, "-m", "tdsched", "schema", "--baseline", "-o", str(out)]
    subprocess.run(command, check=True)
    assert json.loads(out.read_text()) == baseline_schema()
