"""Timing a variant in several placements in memory: each sample runs an equal block of
calls on every placement, and a loaded module gives its own and fresh loads' calls on
the CPU, one on a GPU driver."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tdsched.targets import make_target
from tdsched.targets.compiler import CompileRequest, run_compile
from tdsched.targets.runtime import (
    PLACEMENT_BYTES,
    TIMING_PLACEMENTS,
    LoadedModule,
    timing_placements,
)
from tdsched.targets.timing import Placements, RoundTimer, time_interleaved


def _counting(calls: list[int], index: int) -> Callable[[], None]:
    def run() -> None:
        calls.append(index)

    return run


def test_each_sample_runs_a_block_on_every_placement() -> None:
    calls: list[int] = []
    placed = Placements(tuple(_counting(calls, i) for i in range(3)))
    timer = RoundTimer({"a": placed}, warmup=2, min_sample_s=0.0)
    # warm-up: every placement twice; then one call of the first to size the sample
    assert calls == [0, 0, 1, 1, 2, 2, 0]
    calls.clear()
    for _ in range(2):
        timer.round()
    assert calls == [0, 1, 2, 0, 1, 2]  # one call per placement (min_sample_s 0)
    assert len(timer.samples["a"]) == 2


def test_a_sample_lasts_as_long_with_placements_as_without() -> None:
    calls: list[int] = []
    placed = Placements(tuple(_counting(calls, i) for i in range(4)))
    timer = RoundTimer({"a": placed}, warmup=0, min_sample_s=0.01)
    calls.clear()
    timer.round()
    per_placement = [calls.count(i) for i in range(4)]
    # calls take under a microsecond: a 10 ms sample is many calls, shared equally
    assert len(set(per_placement)) == 1 and per_placement[0] > 1
    assert calls == sorted(calls)  # one block per placement, in turn


def test_a_plain_call_and_placements_time_side_by_side() -> None:
    calls: list[int] = []
    times = time_interleaved(
        {"one": _counting(calls, 9), "three": Placements((_counting(calls, 0),) * 3)},
        repeats=4,
        min_sample_s=0.0,
    )
    assert set(times) == {"one", "three"} and times["three"].samples == 4


def test_a_variant_needs_a_placement() -> None:
    with pytest.raises(ValueError, match="at least one placement"):
        Placements(())


def test_placements_per_driver_and_module_size() -> None:
    assert timing_placements("local-task") == timing_placements("local-sync") == TIMING_PLACEMENTS
    assert TIMING_PLACEMENTS > 1
    assert timing_placements("vulkan") == 1
    # copies of a large module are capped: one copy besides its own load, then none
    assert timing_placements("local-task", PLACEMENT_BYTES) == 2
    assert timing_placements("local-task", PLACEMENT_BYTES + 1) == 1


ADD = """
func.func @add(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %r = arith.addf %a, %b : tensor<64xf32>
  return %r : tensor<64xf32>
}
"""


@pytest.mark.usefixtures("iree")
def test_a_loaded_module_is_timed_in_fresh_loads_of_itself() -> None:
    target = make_target("x86")
    a, b = np.arange(64, dtype=np.float32), np.ones(64, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix="tdsched-test-") as tmp:
        source = Path(tmp) / "add.mlir"
        source.write_text(ADD)
        vmfb = run_compile(CompileRequest(source, target, Path(tmp) / "add.vmfb")).output
        module = LoadedModule(vmfb, "local-sync", "add")
        placed = module.timing_runner([a, b])
        assert len(placed.calls) == TIMING_PLACEMENTS
        assert len({id(call) for call in placed.calls}) == TIMING_PLACEMENTS
        for call in placed.calls:
            call()
        times = time_interleaved({"add": placed}, repeats=TIMING_PLACEMENTS, min_sample_s=0.0)
        assert times["add"].samples == TIMING_PLACEMENTS
        np.testing.assert_array_equal(module.invoke([a, b])[0], a + b)
