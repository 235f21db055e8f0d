"""The incumbent of a sweep: the candidate the recipe runs without the sweep (its shape
table's entry, else its defaults), or why no candidate is; and the report's line on
where it ranked. Synthetic recipes, no compile (the sweeps that evaluate and race it are
in tests/test_sweep.py)."""

from __future__ import annotations

import pytest
from tdsched.schedules.dsl.build_names import build_values
from tdsched.schedules.dsl.space import ParamValue
from tdsched.schedules.frontends.yaml_frontend import parse_recipe
from tdsched.schedules.measure.status import Status
from tdsched.schedules.sweep.database import Result
from tdsched.schedules.sweep.distinct import distinct_builds
from tdsched.schedules.sweep.incumbent import Incumbent, find_incumbent
from tdsched.targets.cpu_model import BuildCpu

AVX512 = BuildCpu("avx512", "znver5")
RECIPE = """\
name: t
workload:
  generator: matmul
  args: {M: "${M}", N: "${M}", K: "${M}"}
parameters: {M: 256, LAYOUT: rowmajor, TM: 16, M0: 16}
graph:
  - mmt4d: {tile: ["${M0}", 16, 1], when: "LAYOUT == 'packed'"}
kernels:
  - name: mm
    match: {op: linalg.matmul}
    when: "LAYOUT == 'rowmajor'"
    schedule:
      - tile: {sizes: ["${TM}", 16, 0], loop: forall, mapping: workgroup, loops: wg}
space:
  LAYOUT: [rowmajor, packed]
  TM: [8, 16, 32]
  M0: [8, 16]
constraints:
  - TM <= M // 16
shapes:
  key: [M]
  rule: exact
  entries:
    - {M: 512, LAYOUT: packed, M0: 8}
    - {M: 128, iree_default: true}
"""


def incumbent_of(text: str = RECIPE, **fixed: ParamValue) -> tuple[Incumbent, dict[str, object]]:
    """The incumbent of a sweep of ``text`` with ``fixed`` (the --param values), as a
    sweep on 2 threads of an AVX-512 CPU enumerates it, and its values."""
    recipe = parse_recipe(text, "r.yaml")
    defaults = {**recipe.parameter_dict, **fixed}
    enumeration = distinct_builds(
        recipe,
        recipe.space.enumerate(defaults, build_values("x86", AVX512)),
        fixed,
        "x86",
        2,
        AVX512,
    )
    found = find_incumbent(recipe, enumeration, fixed, "x86", 2, AVX512)
    point = found.point
    return found, {} if point is None else enumeration.as_params(point)


def test_the_defaults_are_the_incumbent_where_no_entry_serves() -> None:
    found, values = incumbent_of(M=256)
    assert found.source == "its defaults" and found.why_not is None
    assert values == {"LAYOUT": "rowmajor", "TM": 16, "M0": 8}  # M0 reads no build here


def test_the_table_s_entry_is_the_incumbent_at_its_shape() -> None:
    found, values = incumbent_of(M=512)
    assert found.source == "its shape table's entry M=512"
    # the packed build ignores TM: the candidate that builds the same is the incumbent
    assert values["LAYOUT"] == "packed" and values["M0"] == 8


@pytest.mark.parametrize(
    ("change", "fixed", "why"),
    [
        (("", ""), {"M": 128}, "that entry runs IREE's own pipeline, the sweep's baseline"),
        (("TM: 16, M0", "TM: 12, M0"), {"M": 256}, "no valid candidate has TM=12"),
        (("TM: 16, M0", "TM: 32, M0"), {"M": 256}, "no valid candidate has TM=32"),
        # every value is some candidate's, not this combination (the packed tile reads TM)
        (
            ('"${M0}", 16, 1', '"${M0}", "${TM}", 1', "  - TM <=", "  - LAYOUT == 'packed' or TM != 16\n  - TM <="),
            {"M": 256},
            "a constraint prunes it",
        ),
    ],
)  # fmt: skip
def test_why_the_recipe_s_own_values_are_no_candidate(
    change: tuple[str, ...], fixed: dict[str, ParamValue], why: str
) -> None:
    text = RECIPE
    for old, new in zip(change[::2], change[1::2], strict=True):
        text = text.replace(old, new)
    found, _ = incumbent_of(text, **fixed)
    assert found.point is None and found.why_not == why
    assert found.line([], None).endswith(f": no candidate ({why})")


def _result(key: str, speedup: float) -> Result:
    return Result(key, "t", "x86", {}, Status.OK, speedup=speedup, confirmed_speedup=speedup)


def test_the_line_says_where_the_incumbent_ranked() -> None:
    found, _ = incumbent_of(M=256)
    ranked = [_result("a", 1.2), _result("b", 1.1)]
    here = "the recipe's own values (its defaults): "
    assert found.line(ranked, "b") == here + "ranked 2 of 2, 1.100x against the best's 1.200x"
    assert found.line(ranked, "a") == here + "kept, 1.200x; the sweep found nothing faster"
    assert found.line(ranked, "a", kept=True).endswith("nothing raced was shown faster")
    assert found.line(ranked, "z") == here + "failed (see the failures above)"
