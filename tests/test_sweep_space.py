"""Parameter spaces and constraints: parsing, safety, pruning, and their errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.cli.main import main
from tdsched.schedules.dsl.build_names import build_values
from tdsched.schedules.dsl.constraints import ConstraintError, parse_constraint
from tdsched.schedules.frontends.python_api import Match, P, Pow2, Range, RecipeBuilder, generator
from tdsched.schedules.frontends.yaml_frontend import parse_recipe
from tdsched.targets.cpu_model import BuildCpu

HEAD = """\
name: s
workload: {generator: matmul, args: {M: 64, N: 64, K: 64, dtype: f32}}
parameters: {K: 64, TM: 16, TN: 32, TK: 16, MODE: a}
"""

X86 = build_values("x86", BuildCpu("avx512", None))
"""What the enumerations below are built for: an AVX-512 x86 build."""


SPACE = """\
space:
  TM: [8, 16, 32]
  TN: {from: 16, to: 64, step: 16}
  TK: {pow2: [4, 40]}
  MODE: [a, b]
"""


def recipe(tail: str) -> str:
    return HEAD + textwrap.dedent(tail)


def test_yaml_space_lists_ranges_and_powers_of_two() -> None:
    r = parse_recipe(
        recipe(SPACE + "constraints:\n  - TM * TN <= 512\n  - K % TK == 0\n"),
        "r.yaml",
    )
    assert [(a.name, a.values) for a in r.space.axes] == [
        ("TM", (8, 16, 32)),
        ("TN", (16, 32, 48, 64)),
        ("TK", (4, 8, 16, 32)),
        ("MODE", ("a", "b")),
    ]
    e = r.space.enumerate(r.parameter_dict, X86)
    assert e.total == 3 * 4 * 4 * 2
    # TM*TN <= 512 removes (16,48),(16,64),(32,32),(32,48),(32,64): 5 of 12 pairs.
    assert e.pruned == (("'TM * TN <= 512'", 5 * 4 * 2),)
    assert len(e.valid) == 7 * 4 * 2
    assert all(e.as_params(p)["TM"] * e.as_params(p)["TN"] <= 512 for p in e.valid)
    assert e.pruning_lines() == [
        "space: 96 candidates (TM x TN x TK x MODE)",
        "  pruned 40 by 'TM * TN <= 512'",
        "  56 valid",
    ]


def test_constraints_see_fixed_parameters() -> None:
    r = parse_recipe(recipe("space: {TK: [16, 24, 32]}\nconstraints: ['K % TK == 0']\n"), "r.yaml")
    assert r.space.enumerate({**r.parameter_dict, "K": 64}, X86).valid == ((16,), (32,))
    assert r.space.enumerate({**r.parameter_dict, "K": 48}, X86).valid == ((16,), (24,))


@pytest.mark.parametrize(
    ("tail", "line", "expected"),
    [
        ("space: {TQ: [1, 2]}\n", 4, "'TQ' is swept but not declared; add it under 'parameters'"),
        ("space: {TM: {pow2: [0, 8]}}\n", 4, "pow2 bounds must satisfy 1 <= from <= to"),
        ("space: {TM: {from: 8, to: 4}}\n", 4, "'to' (4) is below 'from' (8)"),
        ("space: {TM: {from: 4, to: 8, step: 0}}\n", 4, "step must be a positive integer"),
        ("space: {TM: {from: 4}}\n", 4, "expected a list of values, {from: A, to: B"),
        ("space: {TM: [8, 8]}\n", 4, "repeated values in [8, 8]"),
        ("space: {TM: [8]}\nconstraints:\n  - TM * XX < 4\n", 6, "names XX, which is not a"),
        ("space: {TM: [8]}\nconstraints:\n  - TM <\n", 6, "is not a valid expression"),
        (
            "space: {TM: [8]}\nconstraints:\n  - \"__import__('os').system('x')\"\n",
            6,
            "only min(), max() and abs() may be called",
        ),
        ("space: {TM: [8]}\nconstraints:\n  - TM.real > 1\n", 6, "Attribute is not allowed"),
    ],
)
def test_space_errors_name_file_line_and_fix(tail: str, line: int, expected: str) -> None:
    with pytest.raises(RecipeError) as info:
        parse_recipe(recipe(tail), "r.yaml")
    assert str(info.value).startswith(f"r.yaml:{line}: ")
    assert expected in str(info.value)


def test_constraint_language_is_arithmetic_only() -> None:
    known = frozenset({"A", "B"})
    expr = parse_constraint("min(A, B) * 2 <= max(A, 3) ** 2 and not A == B", known)
    assert expr.holds({"A": 4, "B": 2}) is True
    assert expr.holds({"A": 2, "B": 2}) is False
    assert parse_constraint("4 <= A < B", known).holds({"A": 4, "B": 5}) is True
    with pytest.raises(ConstraintError, match="division by zero"):
        parse_constraint("A % B == 0", known).holds({"A": 4, "B": 0})
    for bad in ("[A][0] > 1", "lambda: 1", "'x' * A > 1", "A if B else 1", "A ** 1000 > 1"):
        with pytest.raises(ConstraintError):
            parse_constraint(bad, known).holds({"A": 2, "B": 3})


def test_a_string_may_be_compared_but_not_computed_with() -> None:
    known = frozenset({"LAYOUT", "B"})
    packed = parse_constraint("LAYOUT == 'packed' or B > 2", known)
    assert packed.holds({"LAYOUT": "packed", "B": 1}) is True
    assert packed.holds({"LAYOUT": "rowmajor", "B": 1}) is False
    with pytest.raises(ConstraintError, match="a 'string' only as a side of a comparison"):
        parse_constraint("LAYOUT + 'x' == 'y'", known)
    with pytest.raises(ConstraintError, match="not supported between"):
        parse_constraint("'a' < B", known).holds({"LAYOUT": "x", "B": 1})


def test_evaluation_errors_prune_with_a_reason() -> None:
    r = parse_recipe(recipe("space: {TK: [0, 16]}\nconstraints: ['K % TK == 0']\n"), "r.yaml")
    e = r.space.enumerate(r.parameter_dict, X86)
    assert e.valid == ((16,),)
    assert e.pruned == (("an error: 'K % TK == 0': division by zero", 1),)


def test_python_space_matches_yaml() -> None:
    b = RecipeBuilder("s", workload=generator("matmul", M=64, N=64, K=64, dtype="f32"))
    b.parameters(K=64, TM=16, TN=32, TK=16, MODE="a")
    b.space(TM=[8, 16, 32], TN=Range(16, 64, 16), TK=Pow2(4, 40), MODE=["a", "b"])
    b.constrain("TM * TN <= 512", "K % TK == 0")
    b.kernel("matmul", match=Match(kind="contraction")).root.tile([P("TM"), P("TN"), 0])
    from_python = b.build().space
    from_yaml = parse_recipe(
        recipe(SPACE + 'constraints: ["TM * TN <= 512", "K % TK == 0"]\n'),
        "r.yaml",
    ).space
    defaults = {"K": 64, "TM": 16, "TN": 32, "TK": 16, "MODE": "a"}
    assert from_python.enumerate(defaults, X86) == from_yaml.enumerate(defaults, X86)


def test_python_space_errors_point_at_the_python_line() -> None:
    b = RecipeBuilder("s", workload=generator("matmul", M=64, N=64, K=64, dtype="f32"))
    b.parameters(TM=16)
    b.constrain("TM < NOPE")
    with pytest.raises(RecipeError) as info:
        b.build()
    assert f"{__file__}:" in str(info.value)
    assert "names NOPE" in str(info.value)


def test_sweep_refuses_a_recipe_without_space_or_with_everything_pruned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    assert main(["sweep", "collapse_dims_x86", "--db", str(db), "-q"]) == 2
    assert "declares no 'space' to sweep" in capsys.readouterr().err
    pruned = tmp_path / "p.yaml"
    pruned.write_text(recipe("space: {TM: [8, 16]}\nconstraints: ['TM > 64']\n"))
    assert main(["sweep", str(pruned), "--db", str(db), "-q"]) == 2
    err = capsys.readouterr().err
    assert "every candidate was pruned" in err
    assert "pruned 2 by 'TM > 64'" in err
