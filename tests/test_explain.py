"""``tdsched explain`` and ``tdsched apply --step/--diff`` on real compiles: nests checked by
hand for a matmul, a conv, a fuse_ext chain and mmt4d; every shipped recipe's nest after
every step agrees with its IR; failing and idle steps are flagged where they happened."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_process import tdsched
from tdsched.recipes import RECIPES_DIR
from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.compile.step_trace import StepTrace, trace
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.shipped import shipped_recipe_names
from tdsched.transform_lib.loop_nest import loop_nest, render

pytestmark = pytest.mark.usefixtures("iree")

_SSA = re.compile(r"%[\w.$-]+")


def _traced(name: str, target: str | None = None, threads: int = 2, **params: int) -> StepTrace:
    found = trace(plan(load(name), BuildTarget(target, threads=threads), params, trace_steps=True))
    assert found.failure is None, found.failure
    return found


def _final_nest(found: StepTrace, schedule: str) -> list[str]:
    unit = next(u for u in found.units if u.schedule.name == schedule)
    assert unit.snapshots[-1].step == len(unit.schedule.steps)
    return [_SSA.sub("%", line) for line in render(loop_nest(unit.snapshots[-1].ir)).split("\n")]


def _nest(text: str) -> list[str]:
    return [_SSA.sub("%", line) for line in text.strip("\n").split("\n")]


def test_matmul_nest_after_its_schedule() -> None:
    """Workgroups 256/64 x 256/128; the fill's register tiles; the k loop by TK=64 (a
    reduction); register tile 8x32 with k step 1; vector shapes of the register tile."""
    found = _traced("matmul_x86", M=256, N=256, K=256, TM=64, TN=128, TK=64, RM=8, RN=32, RK=1)
    assert _final_nest(found, "matmul") == _nest("""
func @matmul_dispatch_0_matmul_256x256x256_f32
  forall (%, %) in (4, 2)  (8 trips, parallel, workgroup y, x)
    for % = 0 to 64 step 8  (8 trips, parallel)
      for % = 0 to 128 step 32  (4 trips, parallel)
        vector.transfer_write  8x32xf32
    for % = 0 to 256 step 64  (4 trips, reduction)
      for % = 0 to 64 step 8  (8 trips, parallel)
        for % = 0 to 128 step 32  (4 trips, parallel)
          for % = 0 to 64 step 1  (64 trips, reduction)
            vector.transfer_read (3 ops)  8x1xf32, 1x32xf32, 8x32xf32
            vector.contract  8x1xf32 · 1x32xf32 · 8x32xf32 → 8x32xf32
            vector.transfer_write  8x32xf32
          vector.transfer_read  8x32xf32
          vector.transfer_write  8x32xf32
""")


def test_fuse_ext_chain_nest_after_its_schedule() -> None:
    """fuse_ext tiles matmul + bias + relu together per workgroup; the single-trip k tile
    (TK = K) is folded by cleanup; the fused elementwise op has its own register tiles."""
    found = _traced("matmul_bias_relu_fuse_ext_x86", M=256, N=256, K=256, TK=256)
    assert _final_nest(found, "matmul_bias_relu") == _nest("""
func @matmul_bias_relu_dispatch_0_matmul_256x256x256_f32
  forall (%, %) in (4, 2)  (8 trips, parallel, workgroup y, x)
    for % = 0 to 64 step 8  (8 trips, parallel)
      for % = 0 to 128 step 32  (4 trips, parallel)
        vector.transfer_write  8x32xf32
    for % = 0 to 64 step 8  (8 trips, parallel)
      for % = 0 to 128 step 32  (4 trips, parallel)
        for % = 0 to 256 step 1  (256 trips, reduction)
          vector.transfer_read (3 ops)  8x1xf32, 1x32xf32, 8x32xf32
          vector.contract  8x1xf32 · 1x32xf32 · 8x32xf32 → 8x32xf32
          vector.transfer_write  8x32xf32
        vector.transfer_read  8x32xf32
        vector.transfer_write  8x32xf32
    for % = 0 to 64 step 8  (8 trips, parallel)
      for % = 0 to 128 step 32  (4 trips, parallel)
        vector.transfer_read (2 ops)  8x32xf32, 32xf32
        vector.broadcast  32xf32 → 8x32xf32
        vector.transfer_write  8x32xf32
""")


def test_conv_nest_after_fuse_ext_and_after_its_schedule() -> None:
    """3x3 conv, 56x56x64 (tiles given, so no shape-table entry decides them): four
    output rows per workgroup (14), their padded input rows 6 high; then per row 8 x 32
    register tiles, each initialized, reduced over 3 x 3 x 64 by 1, 1, 16 and biased
    before the next (the epilogue fused per register tile)."""
    found = _traced("resnet_block_x86", WH=4, RW=8, RF=32, TC=16)
    unit = next(u for u in found.units if u.schedule.name == "conv3x3")
    first = _nest(render(loop_nest(unit.snapshots[1].ir)))
    assert first == _nest("""
func @resnet_block_dispatch_1_conv_56x56x64x3x3x64_f32
  forall (%) in (14)  (14 trips, parallel, workgroup x)
    linalg.fill outs(1x4x56x64xf32)
    linalg.generic ins(1x6x58x64xf32, 3x3x64x64xf32) outs(1x4x56x64xf32) \
[par, par, par, par, red, red, red]
    linalg.generic ins(1x4x56x64xf32, 64xf32) outs(1x4x56x64xf32) [par, par, par, par]
""")
    assert _final_nest(found, "conv3x3")[2:] == _nest("""
    for % = 0 to 4 step 1  (4 trips, parallel)
      for % = 0 to 56 step 8  (7 trips, parallel)
        for % = 0 to 64 step 32  (2 trips, parallel)
          vector.transfer_write  1x1x8x32xf32
          for % = 0 to 3 step 1  (3 trips, reduction)
            for % = 0 to 3 step 1  (3 trips, reduction)
              for % = 0 to 64 step 16  (4 trips, reduction)
                vector.transfer_read (3 ops)  8x16xf32, 16x32xf32, 8x32xf32
                vector.contract  8x16xf32 · 16x32xf32 · 8x32xf32 → 8x32xf32
                vector.transfer_write  8x32xf32
          vector.transfer_read (2 ops)  8x32xf32, 32xf32
          vector.broadcast (2 ops)  32xf32 → 8x32xf32, 8x32xf32 → 1x1x8x32xf32
          vector.transfer_write  1x1x8x32xf32
""")


def test_mmt4d_graph_step_nest() -> None:
    """mmt4d with tile [16, 32, 1] on 1024^3: A packed to 64x1024x16x1, B to 32x1024x32x1,
    the mmt4d result 64x32x16x32 unpacked to 1024x1024."""
    found = _traced("matmul_mmt4d_x86")
    assert _final_nest(found, "graph") == _nest("""
func @matmul
  linalg.pack 1024x1024xf32 -> 64x1024x16x1xf32
  linalg.pack 1024x1024xf32 -> 32x1024x32x1xf32
  linalg.fill outs(64x32x16x32xf32)
  linalg.mmt4d ins(64x1024x16x1xf32, 32x1024x32x1xf32) outs(64x32x16x32xf32)
  linalg.unpack 64x32x16x32xf32 -> 1024x1024xf32
""")


_CONSTANT = re.compile(r"(%[\w.$-]+) = arith\.constant (-?\d+) : index")
_FOR = re.compile(r"scf\.for %[\w.$-]+ = (%[\w.$-]+) to (%[\w.$-]+) step (%[\w.$-]+)")
_FORALL = re.compile(r"scf\.forall \([^)]*\) in \(([\d, ]+)\)")
_LINALG = re.compile(r"^\s*(?:%[\w.$:-]+(?:, %[\w.$:-]+)* = )?linalg\.(?!yield|index)\w+", re.M)


def _ir_facts(ir: str) -> tuple[int, list[str], list[str], int]:
    """From the IR text alone: scf.for count, their trip counts, forall trip counts,
    linalg op count."""
    consts = {name: int(value) for name, value in _CONSTANT.findall(ir)}
    fors = _FOR.findall(ir)
    trips = []
    for lb, ub, step in fors:
        if {lb, ub, step} <= consts.keys():
            trips.append(str(-(-(consts[ub] - consts[lb]) // consts[step])))
        else:
            trips.append("?")
    foralls = []
    for sizes in _FORALL.findall(ir):
        product = 1
        for size in sizes.split(","):
            product *= int(size)
        foralls.append(str(product))
    return len(fors), sorted(trips), sorted(foralls), len(_LINALG.findall(ir))


def _nest_facts(ir: str) -> tuple[int, list[str], list[str], int]:
    lines = [line.text for line in loop_nest(ir)]
    fors = [t for t in lines if t.startswith("for ")]
    trip = re.compile(r"\((\?|\d+) trips?")
    trips = sorted(trip.search(t).group(1) for t in fors)  # type: ignore[union-attr]
    foralls = [t for t in lines if t.startswith("forall ") and " in (" in t]
    forall_trips = sorted(trip.search(t).group(1) for t in foralls)  # type: ignore[union-attr]
    return len(fors), trips, forall_trips, sum(t.startswith("linalg.") for t in lines)


def _shipped_pairs() -> list[tuple[str, str]]:
    return [(name, target) for name in shipped_recipe_names() for target in load(name).targets]


@pytest.mark.parametrize(("name", "target"), _shipped_pairs())
def test_every_step_nest_of_every_shipped_recipe_matches_its_ir(
    name: str, target: str, request: pytest.FixtureRequest
) -> None:
    """Loops, trip counts and linalg ops of the nest after every step agree with what a
    reading of the IR text (regexes, no bindings) finds."""
    if target == "vulkan":
        request.getfixturevalue("vulkan")
    # On 1 thread, else 2: a shape-table entry may run IREE's default build at the
    # recipe's default shape on one count (matmul_bias_relu_x86 at 512^3 on 2 threads,
    # resnet_block_x86 at 56x56 on 1) and keep its schedule on the other.
    found = _traced(name, target, threads=1)
    if not found.schedules:
        found = _traced(name, target, threads=2)
    if not found.schedules:
        pytest.skip(f"{name} has no schedule steps on 1 or 2 threads")
    assert found.units
    for unit in found.units:
        steps = [s.step for s in unit.snapshots]
        assert steps == list(range(len(unit.schedule.steps) + 1)), unit.unit
        for snapshot in unit.snapshots:
            assert _nest_facts(snapshot.ir) == _ir_facts(snapshot.ir), (
                f"{unit.unit} after step {snapshot.step}"
            )


ROWMAJOR = ("--param", "LAYOUT=rowmajor")
"""matmul_x86's kernel schedule (its shape table packs the default 1024^3 shape)."""


def _recipe_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (RECIPES_DIR / "matmul_x86.yaml").read_text()
    assert old in text
    path = tmp_path / "edited.yaml"
    path.write_text(text.replace(old, new))
    return path


def test_apply_diff_shows_what_a_tile_step_changed_and_flags_an_idle_step(
    tmp_path: Path,
) -> None:
    recipe = _recipe_with(
        tmp_path,
        "      - cleanup: {}\n      - vectorize: {}",
        "      - cleanup: {}\n" * 2 + "      - vectorize: {}",
    )
    proc = tdsched(
        "apply", str(recipe), *ROWMAJOR, "--step", "2", "--step", "10", "--diff", check=True
    )
    out = proc.stdout
    tiled = out.partition("step 2 of 11: tile sizes=[")[2].partition("// kernel")[0]
    assert re.search(r"^\+.*scf\.forall \(%\w+, %\w+\) in \(", tiled, re.M)
    idle = out.partition("step 10 of 11: cleanup")[2]
    assert "// ! this step changed nothing" in idle
    assert "step 11 of 11" not in out  # not selected
    explained = tdsched("explain", str(recipe), *ROWMAJOR, "--step", "matmul:10", check=True).stdout
    assert "! this step changed nothing" in explained


def test_an_empty_handle_is_flagged_at_its_step_and_the_steps_before_are_shown(
    tmp_path: Path,
) -> None:
    recipe = _recipe_with(
        tmp_path,
        "      - match: {op: linalg.fill, as: fill}\n",
        "      - match: {op: linalg.fill, as: fill}\n"
        "      - match: {op: linalg.generic, as: gen}\n"
        "      - generalize: {target: gen}\n",
    )
    proc = tdsched("explain", str(recipe), *ROWMAJOR)
    assert proc.returncode == 2
    line = recipe.read_text().splitlines().index("      - match: {op: linalg.generic, as: gen}")
    assert (
        f"edited.yaml:{line + 1}: kernels[0].schedule[1].match: this match step matched no op"
        in (proc.stderr)
    )
    step2 = proc.stdout.split("step 2 of 12: match as=gen")[1].split("step 3 of 12")[0]
    assert "! this match step matched no op in the dispatch" in step2
    step3 = proc.stdout.split("step 3 of 12: generalize")[1].split("step 4 of 12")[0]
    assert "! this step changed nothing" in step3
    assert "step 12 of 12: vectorize" in proc.stdout


def test_explain_json_and_step_selection_errors() -> None:
    proc = tdsched("explain", "matmul_x86", *ROWMAJOR, "--step", "tile", "--json", check=True)
    data = json.loads(proc.stdout)
    assert data["failure"] is None
    (unit,) = data["units"]
    assert unit["schedule"] == "matmul"
    assert [s["step"] for s in unit["steps"]] == [2, 5, 6, 7, 8]
    assert all(s["title"].startswith(f"step {s['step']} of 10: tile") for s in unit["steps"])
    assert any(line["text"].startswith("forall (") for line in unit["steps"][0]["nest"])
    bad = tdsched("explain", "matmul_x86", *ROWMAJOR, "--step", "graph:1")
    assert bad.returncode == 2
    assert "--step 'graph:1' names no step; the schedules are matmul (steps 1-10:" in bad.stderr


def test_a_root_lost_by_iree_is_blamed_on_the_step_that_uses_it() -> None:
    """IREE re-creates a convolution after the kernel matcher tagged it: a step on
    'root' is told so, with the fix, instead of tiling nothing."""
    proc = tdsched("explain", str(Path(__file__).parents[1] / "docs/walkthrough/conv_step1.yaml"))
    assert proc.returncode == 2
    step2 = proc.stdout.partition("step 2 of 4: tile")[2].partition("step 3 of 4")[0]
    assert "! this step uses 'root', the op kernel 'conv' matched, but the strategy" in step2
    assert "conv_step1.yaml:15: kernels[0].schedule[1].tile: this step uses 'root'" in (proc.stderr)
    assert "'- match: {op: linalg.generic, as: conv}'" in proc.stderr
