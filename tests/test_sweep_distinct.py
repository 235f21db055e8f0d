"""A sweep's space keeps one candidate per build: points whose values differ only where
a `when` left them unused are the same build (their content keys agree)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path

import pytest
from tdsched.schedules.cli.sweep_command import _progress
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.dsl.build_names import build_values
from tdsched.schedules.dsl.space import Point
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.shipped import find_recipe
from tdsched.schedules.measure.request import Request
from tdsched.schedules.measure.status import Status
from tdsched.schedules.sweep.candidates import content_key, plan_point
from tdsched.schedules.sweep.database import Result, ResultsDB
from tdsched.schedules.sweep.distinct import (
    SAME_BUILD,
    build_signature,
    distinct_builds,
    parameters_read,
)
from tdsched.schedules.sweep.executors import make_executor
from tdsched.schedules.sweep.messages import SweepContext
from tdsched.schedules.sweep.runner import Sweep, SweepOptions, _narrowed
from tdsched.schedules.sweep.table import ranked_table, result_json
from tdsched.targets.cpu_model import BuildCpu

SHAPE = {"M": 128, "N": 128, "K": 128}

X86 = build_values("x86", BuildCpu("avx512", None))
"""What the enumerations below are built for: an AVX-512 x86 build."""


def test_packed_points_that_differ_in_row_major_tiles_are_one_candidate() -> None:
    recipe = load("matmul_x86")
    enumeration = _narrowed(recipe, SHAPE).enumerate({**recipe.parameter_dict, **SHAPE}, X86)
    distinct = distinct_builds(recipe, enumeration, SHAPE, "x86", 2)
    assert len(distinct.valid) < len(enumeration.valid)
    assert distinct.pruned[-1] == (SAME_BUILD, len(enumeration.valid) - len(distinct.valid))
    assert f"pruned {len(enumeration.valid) - len(distinct.valid)} by {SAME_BUILD}" in "\n".join(
        distinct.pruning_lines()
    )
    layouts = defaultdict(set)
    for point in distinct.valid:
        params = distinct.as_params(point)
        layouts[params["LAYOUT"]].add(point)
    # packed: one candidate per unpack placement and AVX-512 pack tile, whatever the
    # row-major tiles; row-major: one per tile choice, whatever UNPACK and the pack tiles
    packed = [
        tuple(distinct.as_params(p)[n] for n in ("UNPACK", "M0", "N0")) for p in layouts["packed"]
    ]
    assert len(packed) == len(set(packed)) == 2 * 4
    assert {(m0, n0) for _, m0, n0 in packed} == {(8, 16), (8, 32), (16, 16), (16, 32)}
    names = ("TM", "TN", "TK", "RN")
    tiles = [tuple(distinct.as_params(p)[n] for n in names) for p in layouts["rowmajor"]]
    assert len(tiles) == len(set(tiles)) > 1
    # What each kept candidate's build ignores, for the tables to show as '-'.
    for point in layouts["rowmajor"]:
        assert set(distinct.ignored[point]) == {"UNPACK", "M0", "N0"}
    for point in layouts["packed"]:
        assert set(distinct.ignored[point]) >= {"TM", "TN", "RN"}
        assert not {"LAYOUT", "UNPACK", "M0", "N0"} & set(distinct.ignored[point])


def test_the_table_shows_what_a_candidate_ignores_as_a_dash() -> None:
    names = ["LAYOUT", "TM", "M0"]
    rowmajor = Result("k1", "mm", "x86", {"LAYOUT": "rowmajor", "TM": 64, "M0": 8}, Status.OK)
    packed = Result("k2", "mm", "x86", {"LAYOUT": "packed", "TM": 8, "M0": 16}, Status.OK)
    ignored = {("rowmajor", 64, 8): ("M0",), ("packed", 8, 16): ("TM",)}
    rows = ranked_table([rowmajor, packed], [], names, 5, None, ignored).splitlines()
    assert rows[1].split()[:4] == ["1", "rowmajor", "64", "-"]
    assert rows[2].split()[:4] == ["2", "packed", "-", "16"]
    assert result_json(packed, None, names, ignored)["ignored"] == ["TM"]


def test_points_with_one_signature_build_the_same_module_and_others_do_not() -> None:
    recipe = load("matmul_x86")
    enumeration = _narrowed(recipe, SHAPE).enumerate({**recipe.parameter_dict, **SHAPE}, X86)
    groups: dict[Hashable, list[Point]] = defaultdict(list)
    for point in enumeration.valid:
        groups[build_signature(recipe, {**SHAPE, **enumeration.as_params(point)}, "x86", 2)].append(
            point
        )
    context = SweepContext(
        Request(str(find_recipe("matmul_x86")), BuildTarget("x86", threads=2), dict(SHAPE))
    )

    def key(point: Point) -> str:
        return content_key(plan_point(recipe, context, enumeration.as_params(point)))

    shared = [members for members in groups.values() if len(members) > 1][:2]
    assert shared, "the packed layout leaves the row-major tiles unused"
    for members in shared:
        assert key(members[0]) == key(members[-1])
    firsts = [members[0] for members in list(groups.values())[:3]]
    assert len({key(p) for p in firsts}) == len(firsts)


def test_a_recipe_without_conditions_keeps_its_space() -> None:
    recipe = load("matmul_vulkan")
    enumeration = _narrowed(recipe, {}).enumerate(recipe.parameter_dict, X86)
    assert distinct_builds(recipe, enumeration, {}, "vulkan", None) is enumeration


def test_a_candidate_reads_its_own_layouts_parameters_and_the_conditions() -> None:
    """What a shape-table entry written by a sweep keeps of the winner's values."""
    matmul = load("matmul_x86")
    packed = parameters_read(matmul, {**SHAPE, "LAYOUT": "packed"}, "x86", 2)
    rowmajor = parameters_read(matmul, {**SHAPE, "LAYOUT": "rowmajor"}, "x86", 2)
    assert {"LAYOUT", "UNPACK", "M0", "N0", "M", "N", "K", "WEIGHTS"} <= packed
    assert not {"TM", "TN", "TK", "RN"} & packed
    assert {"LAYOUT", "TM", "TN", "TK", "RN", "M", "N", "K"} <= rowmajor
    assert not {"M0", "N0"} & rowmajor
    conv = load("conv2d_x86")
    direct = parameters_read(conv, {"LAYOUT": "direct"}, "x86", 2)
    assert {"LAYOUT", "KS", "PAD", "WH", "RW", "RF", "TC"} <= direct
    assert not {"M0", "N0", "K0"} & direct
    # on Vulkan the direct kernel is left out: its tiles are not read
    assert not {"WH", "RW"} & parameters_read(conv, {"LAYOUT": "direct"}, "vulkan", None)


def test_the_progress_line_names_the_leader_by_what_its_build_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live progress line's leader, like the tables, leaves out the swept values its
    build ignores (a row-major candidate's UNPACK, M0, N0) and the fixed shape."""
    db = ResultsDB(tmp_path / "s.db")
    try:
        sweep = Sweep("matmul_x86", SweepOptions(fixed=SHAPE), db, make_executor("local", 1), 1)
    finally:
        db.close()
    point = next(p for p in sweep.enumeration.valid if sweep.enumeration.ignored.get(p))
    params = {**SHAPE, **sweep.enumeration.as_params(point)}
    leader = Result("k", "matmul_x86", "x86", params, Status.OK, speedup=1.1)
    sweep.state.best, sweep.state.done = leader, 1
    _progress(quiet=False)("timed", sweep.state)
    shown = capsys.readouterr().err.split("leader 1.100x (")[1].split(")")[0]
    ignored = set(sweep.enumeration.ignored[point]) | set(SHAPE)
    assert shown == ", ".join(
        f"{n}={params[n]}" for n in sweep.enumeration.names if n not in ignored
    )
    assert not {item.split("=")[0] for item in shown.split(", ")} & ignored
