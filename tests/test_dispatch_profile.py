"""``tdsched run --profile``'s parts that need no IREE run: reading IREE's profile listing
and benchmark results, what each dispatch does (from a configured module), pairing the two
builds' dispatches, the table and the roofline plot, and the command line's refusals."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tdsched.schedules.cli.main import main
from tdsched.schedules.measure.machine_peak import MachinePeak
from tdsched.schedules.measure.profile_report import (
    BuildProfile,
    DispatchPair,
    DispatchProfile,
    DispatchRow,
    join_dispatches,
    pair_dispatches,
    profile_lines,
)
from tdsched.schedules.measure.roofline_plot import PlotError, plot_roofline, require_matplotlib
from tdsched.targets.dispatch_profile import (
    DispatchTime,
    ModuleProfile,
    ProfileError,
    dispatch_times,
    last_calls,
    parse_benchmark,
    parse_dispatch_events,
)
from tdsched.targets.runtime import keep_freed_memory_env
from tdsched.targets.target import make_target
from tdsched.targets.timing import Timing, round_order
from tdsched.transform_lib.dispatch_work import DispatchWork, read_dispatch_work
from tdsched.transform_lib.work import Work

# `iree-profile dispatch --dispatch_events --format=jsonl` of matmul_chain_x86 (two chained
# 256^3 matmuls: IREE deduplicated them into one function, dispatched twice per call), two
# calls on local-task with --device_profiling_mode=host-execution (IREE 3.13).
HOST_EVENTS = """\
{"type":"host_dispatch_event","timing_source":"host_execution_event","time_domain":"iree_host_time_ns","duration_time_domain":"iree_host_duration_ns","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":3,"submission_id":3,"command_buffer_id":1,"command_index":0,"executable_id":1,"function_ordinal":0,"key":"matmul_chain_dispatch_0_matmul_256x256x256_f32","flags":5,"status_code":0,"workgroup_count":[1,8,1],"workgroup_size":[1,1,1],"start_host_time_ns":6744329442523,"end_host_time_ns":6744329848887,"duration_ns":406364,"valid":true,"tile_count":8,"tile_duration_sum_ns":406364}
{"type":"host_dispatch_event","timing_source":"host_execution_event","time_domain":"iree_host_time_ns","duration_time_domain":"iree_host_duration_ns","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":4,"submission_id":3,"command_buffer_id":1,"command_index":2,"executable_id":1,"function_ordinal":0,"key":"matmul_chain_dispatch_0_matmul_256x256x256_f32","flags":5,"status_code":0,"workgroup_count":[1,8,1],"workgroup_size":[1,1,1],"start_host_time_ns":6744329849388,"end_host_time_ns":6744330249894,"duration_ns":400506,"valid":true,"tile_count":8,"tile_duration_sum_ns":400506}
{"type":"host_dispatch_event","timing_source":"host_execution_event","time_domain":"iree_host_time_ns","duration_time_domain":"iree_host_duration_ns","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":9,"submission_id":7,"command_buffer_id":1,"command_index":0,"executable_id":1,"function_ordinal":0,"key":"matmul_chain_dispatch_0_matmul_256x256x256_f32","flags":5,"status_code":0,"workgroup_count":[1,8,1],"workgroup_size":[1,1,1],"start_host_time_ns":6744330330164,"end_host_time_ns":6744330621637,"duration_ns":291473,"valid":true,"tile_count":8,"tile_duration_sum_ns":291473}
{"type":"host_dispatch_event","timing_source":"host_execution_event","time_domain":"iree_host_time_ns","duration_time_domain":"iree_host_duration_ns","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":10,"submission_id":7,"command_buffer_id":1,"command_index":2,"executable_id":1,"function_ordinal":0,"key":"matmul_chain_dispatch_0_matmul_256x256x256_f32","flags":5,"status_code":0,"workgroup_count":[1,8,1],"workgroup_size":[1,1,1],"start_host_time_ns":6744330621798,"end_host_time_ns":6744330962214,"duration_ns":340416,"valid":true,"tile_count":8,"tile_duration_sum_ns":340416}
{"type":"dispatch_summary","mode":"events","filter":"*","total_dispatches":0,"matched_dispatches":0,"valid_dispatches":0,"invalid_dispatches":0,"aggregate_groups":0,"total_host_dispatches":4,"matched_host_dispatches":4,"valid_host_dispatches":4,"invalid_host_dispatches":0,"host_aggregate_groups":0}
"""

# The same listing of resnet_block_vulkan on lavapipe, --device_profiling_mode=dispatch-events
# (device timestamps): the first call's three dispatches.
DEVICE_EVENTS = """\
{"type":"dispatch_event","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":1,"submission_id":3,"command_buffer_id":1,"command_index":2,"executable_id":1,"function_ordinal":0,"key":"resnet_block_dispatch_0_matmul_like_56x56x64x256_f32","flags":1,"workgroup_count":[1,7,56],"workgroup_size":[16,8,1],"start_tick":5746894913242,"end_tick":5746960965154,"duration_ticks":66051912,"valid":true,"clock_fit_available":true,"device_tick_domain":"device_tick","duration_time_domain":"device_tick_duration_ns","duration_ns":66051912}
{"type":"dispatch_event","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":2,"submission_id":3,"command_buffer_id":1,"command_index":4,"executable_id":2,"function_ordinal":0,"key":"resnet_block_dispatch_1_conv_56x56x64x3x3x64_f32","flags":1,"workgroup_count":[1,7,56],"workgroup_size":[16,8,1],"start_tick":5746961042819,"end_tick":5747094726234,"duration_ticks":133683415,"valid":true,"clock_fit_available":true,"device_tick_domain":"device_tick","duration_time_domain":"device_tick_duration_ns","duration_ns":133683415}
{"type":"dispatch_event","physical_device_ordinal":0,"queue_ordinal":0,"stream_id":0,"event_id":3,"submission_id":3,"command_buffer_id":1,"command_index":6,"executable_id":3,"function_ordinal":0,"key":"resnet_block_dispatch_2_matmul_like_3136x256x64_f32","flags":1,"workgroup_count":[4,392,1],"workgroup_size":[16,8,1],"start_tick":5747094766383,"end_tick":5747141017003,"duration_ticks":46250620,"valid":true,"clock_fit_available":true,"device_tick_domain":"device_tick","duration_time_domain":"device_tick_duration_ns","duration_ns":46250620}
"""

# iree-compile output stopped after kernel configuration, cut down by hand: a strategy
# kernel (llvm-cpu: whole-buffer loads), a config kernel (SPIR-V: dispatch tensors, f16),
# IREE's own copy with a dynamic size, and the host function (not a dispatch).
CONFIGURED = """\
#layout2 = #hal.pipeline.layout<constants = 1, bindings = [#hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer>]>
#layout3 = #hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer, ReadOnly>, #hal.pipeline.binding<storage_buffer>]>
module {
  hal.executable private @mm_dispatch_0 {
    hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
      hal.executable.export public @mm_dispatch_0_matmul_8x16x4_f32 ordinal(0) layout(#layout3)
      builtin.module {
        func.func @mm_dispatch_0_matmul_8x16x4_f32() attributes {translation_info = #iree_codegen.translation_info<pipeline = #iree_codegen.transform_dialect_codegen codegen_spec = @tdsched_strategy_tiled_mm>} {
          %c0 = arith.constant 0 : index
          %cst = arith.constant 0.0 : f32
          %a = hal.interface.binding.subspan layout(#layout3) binding(0) offset(%c0) : memref<8x4xf32>
          %b = hal.interface.binding.subspan layout(#layout3) binding(1) offset(%c0) : memref<4x16xf32>
          %c = hal.interface.binding.subspan layout(#layout3) binding(2) offset(%c0) : memref<8x16xf32>
          %0 = iree_codegen.load_from_buffer %a : memref<8x4xf32> -> tensor<8x4xf32>
          %1 = iree_codegen.load_from_buffer %b : memref<4x16xf32> -> tensor<4x16xf32>
          %2 = tensor.empty() : tensor<8x16xf32>
          %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<8x16xf32>) -> tensor<8x16xf32>
          %4 = linalg.matmul ins(%0, %1 : tensor<8x4xf32>, tensor<4x16xf32>) outs(%3 : tensor<8x16xf32>) -> tensor<8x16xf32>
          iree_codegen.store_to_buffer %4, %c : tensor<8x16xf32> into memref<8x16xf32>
          return
        }
      }
    }
  }
  hal.executable private @mm_dispatch_1 {
    hal.executable.variant public @spirv target(#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb">) {
      hal.executable.export public @mm_dispatch_1_elementwise_8x16_f16 ordinal(0) layout(#layout2)
      builtin.module {
        func.func @mm_dispatch_1_elementwise_8x16_f16() {
          %c0 = arith.constant 0 : index
          %in = hal.interface.binding.subspan layout(#layout2) binding(0) offset(%c0) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x16xf16>>
          %out = hal.interface.binding.subspan layout(#layout2) binding(1) offset(%c0) : !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x16xf16>>
          %0 = iree_tensor_ext.dispatch.tensor.load %in, offsets = [0, 0], sizes = [8, 16], strides = [1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x16xf16>> -> tensor<8x16xf16>
          %1 = tensor.empty() : tensor<8x16xf16>
          %2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%0 : tensor<8x16xf16>) outs(%1 : tensor<8x16xf16>) attrs = {tdsched.kernel = "relu"} {
          ^bb0(%x: f16, %o: f16):
            %z = arith.constant 0.0 : f16
            %m = arith.maximumf %x, %z : f16
            linalg.yield %m : f16
          } -> tensor<8x16xf16>
          iree_tensor_ext.dispatch.tensor.store %2, %out, offsets = [0, 0], sizes = [8, 16], strides = [1, 1] : tensor<8x16xf16> -> !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x16xf16>>
          return
        }
      }
    }
  }
  hal.executable private @mm_dispatch_2 {
    hal.executable.variant public @cpu target(#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">) {
      hal.executable.export public @mm_dispatch_2_slow_memcpy ordinal(0) layout(#layout2)
      builtin.module {
        func.func @mm_dispatch_2_slow_memcpy() {
          %c0 = arith.constant 0 : index
          %n = hal.interface.constant.load layout(#layout2) ordinal(0) : index
          %in = hal.interface.binding.subspan layout(#layout2) binding(0) offset(%c0) : memref<?xi8>{%n}
          %out = hal.interface.binding.subspan layout(#layout2) binding(1) offset(%c0) : memref<?xi8>{%n}
          %0 = iree_codegen.load_from_buffer %in : memref<?xi8> -> tensor<?xi8>
          iree_codegen.store_to_buffer %0, %out : tensor<?xi8> into memref<?xi8>
          return
        }
      }
    }
  }
  util.func public @mm(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    util.return %arg0 : tensor<8x4xf32>
  }
}
"""


def test_host_timed_dispatches_are_summed_per_call_and_the_median_taken() -> None:
    events = parse_dispatch_events(HOST_EVENTS, run=4)
    assert [e.call for e in events] == [(4, 3), (4, 3), (4, 7), (4, 7)]
    (matmul,) = dispatch_times(events)
    assert matmul.function == "matmul_chain_dispatch_0_matmul_256x256x256_f32"
    assert matmul.per_call == 2 and matmul.calls == 2
    per_call_ns = [406364 + 400506, 291473 + 340416]
    assert matmul.median_ms == pytest.approx(sum(per_call_ns) / 2 / 1e6)


def test_device_timed_dispatches_keep_the_order_they_run_in() -> None:
    times = dispatch_times(parse_dispatch_events(DEVICE_EVENTS))
    assert [t.function.split("_dispatch_")[1] for t in times] == [
        "0_matmul_like_56x56x64x256_f32",
        "1_conv_56x56x64x3x3x64_f32",
        "2_matmul_like_3136x256x64_f32",
    ]
    assert [t.median_ms for t in times] == pytest.approx([66.051912, 133.683415, 46.25062])
    assert all(t.per_call == 1 and t.calls == 1 for t in times)


def test_invalid_events_and_summaries_are_not_dispatches() -> None:
    first = json.loads(DEVICE_EVENTS.splitlines()[0])
    invalid = json.dumps({**first, "valid": False, "submission_id": 99})
    events = parse_dispatch_events(DEVICE_EVENTS + invalid + "\n")
    assert len(events) == 3 and all(e.call == (0, 3) for e in events)
    assert parse_dispatch_events(HOST_EVENTS.splitlines()[-1]) == []  # the summary line


def test_only_the_calls_of_the_timed_run_count() -> None:
    events = parse_dispatch_events(HOST_EVENTS)
    assert {e.call for e in last_calls(events, 1)} == {(0, 7)}
    assert last_calls(events, 5) == events


def test_the_benchmark_gives_calls_and_milliseconds_per_call() -> None:
    results = {
        "benchmarks": [
            {"run_type": "iteration", "iterations": 3, "real_time": 90.0, "time_unit": "us"},
            {"run_type": "iteration", "iterations": 41, "real_time": 1250.0, "time_unit": "us"},
            {"run_type": "aggregate", "iterations": 2, "real_time": 9.0, "time_unit": "ms"},
        ]
    }
    assert parse_benchmark(json.dumps(results)) == (41, pytest.approx(1.25))
    with pytest.raises(ProfileError, match="no timed run"):
        parse_benchmark(json.dumps({"benchmarks": results["benchmarks"][2:]}))


def test_each_target_profiles_with_the_mode_its_driver_implements() -> None:
    assert make_target("x86").profiling_mode == "host-execution"
    assert make_target("vulkan").profiling_mode == "dispatch-events"


def test_tools_get_the_malloc_settings_of_in_process_timing() -> None:
    ours = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"
    assert keep_freed_memory_env({"A": "1"}) == {"A": "1", "GLIBC_TUNABLES": ours}
    given = keep_freed_memory_env({"GLIBC_TUNABLES": "glibc.x=1"})
    assert given["GLIBC_TUNABLES"] == f"glibc.x=1:{ours}"


def test_rounds_alternate_their_order() -> None:
    assert [round_order(["a", "b", "c"], i) for i in range(3)] == [
        ["a", "b", "c"],
        ["c", "b", "a"],
        ["a", "b", "c"],
    ]


def test_what_each_dispatch_does_is_read_from_the_configured_module() -> None:
    found = read_dispatch_work(CONFIGURED)
    assert [(d.function, d.work.ops, d.traffic_bytes, d.kernel) for d in found] == [
        (
            "mm_dispatch_0_matmul_8x16x4_f32",
            2 * 8 * 16 * 4,
            (8 * 4 + 4 * 16 + 8 * 16) * 4,
            "tiled_mm",
        ),
        ("mm_dispatch_1_elementwise_8x16_f16", 8 * 16, 2 * 8 * 16 * 2, "relu"),
        ("mm_dispatch_2_slow_memcpy", 0, None, None),
    ]


PEAK = MachinePeak("x86", 2, "test CPU", "3.13.0", 200.0, 20.0, "2026-01-01T00:00:00Z")
"""A ridge at 10 FLOP per byte."""


def _work(
    function: str, flops: int, traffic: int | None, kernel: str | None = None
) -> DispatchWork:
    return DispatchWork(function, Work(flops), traffic, kernel)


def _profile(call_ms: float, *dispatches: tuple[str, float, int]) -> ModuleProfile:
    times = tuple(DispatchTime(name, ms, runs, 10) for name, ms, runs in dispatches)
    return ModuleProfile(Timing(call_ms, call_ms, call_ms, 7), times)


def test_a_dispatch_is_joined_with_its_work_and_the_roof_it_is_under() -> None:
    profile = _profile(
        4.0,
        ("f_dispatch_0_matmul_64x64x64_f32", 1.0, 1),  # 100 FLOP/byte: under the FMA roof
        ("f_dispatch_1_elementwise_64_f32", 0.5, 2),  # 0.5 FLOP/byte: under the bandwidth
        ("f_dispatch_2_slow_memcpy", 0.25, 1),  # no work known
    )
    work = {
        "f_dispatch_0_matmul_64x64x64_f32": _work(
            "f_dispatch_0_matmul_64x64x64_f32", 10**8, 10**6, "mm"
        ),
        "f_dispatch_1_elementwise_64_f32": _work(
            "f_dispatch_1_elementwise_64_f32", 10**6, 2 * 10**6
        ),
    }
    matmul, epilogue, copy = join_dispatches(profile, work, PEAK)
    assert matmul.kernel == "mm" and matmul.share == 0.25
    assert matmul.gflops == pytest.approx(100.0) and matmul.gbps == pytest.approx(1.0)
    assert matmul.bound == "FMA" and matmul.fraction_of_roof == pytest.approx(0.5)
    assert matmul.intensity == 100 and matmul.label == "#0 matmul_64x64x64_f32"
    # dispatched twice per call: twice the work in the time of both
    assert epilogue.flops == 2 * 10**6 and epilogue.traffic_bytes == 4 * 10**6
    assert epilogue.gbps == pytest.approx(8.0) and epilogue.bound == "bandwidth"
    assert epilogue.fraction_of_roof == pytest.approx(8.0 / 20.0)
    assert copy.kernel is None and copy.flops is None and copy.fraction_of_roof is None
    assert join_dispatches(profile, work, None)[0].fraction_of_roof is None


def _row(
    function: str, ms: float, flops: int | None = None, kernel: str | None = None
) -> DispatchRow:
    return DispatchRow(
        function, kernel, ms, 1, 10, ms / 10, flops, (), None, None, None, None, None
    )


def test_dispatches_pair_by_description_then_by_work_else_stand_alone() -> None:
    scheduled = [
        _row("f_dispatch_0_pack_f32", 0.1),  # a pack the graph schedule added
        _row("f_dispatch_1_mmt4d_16x16x64x16x16x1_f32", 1.0, flops=5000),
        _row("f_dispatch_2_conv_8x8x3x3_f32", 2.0, flops=700),
    ]
    baseline = [
        _row("f_dispatch_0_conv_8x8x3x3_f32", 3.0, flops=700),
        _row("f_dispatch_1_matmul_256x256x64_f32", 1.5, flops=5000),
        _row("f_dispatch_2_elementwise_256_f32", 0.2, flops=256),
    ]
    pairs = pair_dispatches(scheduled, baseline)
    shape = [
        (p.scheduled and p.scheduled.function, p.baseline and p.baseline.function, p.paired_by)
        for p in pairs
    ]
    assert shape == [
        ("f_dispatch_0_pack_f32", None, "unpaired"),
        ("f_dispatch_1_mmt4d_16x16x64x16x16x1_f32", "f_dispatch_1_matmul_256x256x64_f32", "work"),
        ("f_dispatch_2_conv_8x8x3x3_f32", "f_dispatch_0_conv_8x8x3x3_f32", "description"),
        (None, "f_dispatch_2_elementwise_256_f32", "unpaired"),
    ]
    assert pairs[1].speedup == pytest.approx(1.5) and pairs[0].speedup is None


def _dispatch_profile() -> DispatchProfile:
    scheduled = join_dispatches(
        _profile(4.0, ("f_dispatch_0_matmul_64x64x64_f32", 1.0, 1), ("f_dispatch_1_x_f32", 2.0, 2)),
        {
            "f_dispatch_0_matmul_64x64x64_f32": _work(
                "f_dispatch_0_matmul_64x64x64_f32", 10**8, 10**6, "mm"
            ),
            "f_dispatch_1_x_f32": _work("f_dispatch_1_x_f32", 0, 10**6),
        },
        PEAK,
    )
    baseline = join_dispatches(
        _profile(5.0, ("f_dispatch_0_matmul_64x64x64_f32", 2.0, 1), ("f_dispatch_1_y_f32", 2.5, 1)),
        {
            "f_dispatch_0_matmul_64x64x64_f32": _work(
                "f_dispatch_0_matmul_64x64x64_f32", 10**8, 10**6
            ),
            "f_dispatch_1_y_f32": _work("f_dispatch_1_y_f32", 10**7, 10**6),
        },
        PEAK,
    )
    builds = {
        "scheduled": BuildProfile(Timing(4.0, 3.9, 4.5, 7), tuple(scheduled), timed_ms=3.75),
        "baseline": BuildProfile(Timing(5.0, 4.8, 5.1, 7), tuple(baseline)),
    }
    pairs = tuple(pair_dispatches(scheduled, baseline))
    return DispatchProfile("x86", 2, "host-execution", 7, PEAK, builds, pairs)


def test_the_table_has_a_row_per_dispatch_and_build_and_says_where_calls_went() -> None:
    profile = _dispatch_profile()
    lines = profile_lines(profile)
    assert lines[0].startswith("profile  each dispatch's median time per call, 7 rounds")
    assert "x86, 2 threads" in lines[0] and "host-execution" in lines[0]
    header, *rows = lines[1:5]
    assert header.split() == [
        "dispatch",
        "build",
        "kernel",
        "ms",
        "share",
        "GFLOP/s",
        "GB/s",
        "roof",
        "speedup",
    ]
    assert rows[0].split() == [
        "#0",
        "matmul_64x64x64_f32",
        "scheduled",
        "mm",
        "1.000",
        "25%",
        "100.0",
        "1.0",
        "50%",
        "FMA",
        "2.00x",
    ]
    assert rows[1].split() == [
        "#0",
        "matmul_64x64x64_f32",
        "default",
        "IREE",
        "default",
        "2.000",
        "40%",
        "50.0",
        "0.5",
        "25%",
        "FMA",
    ]
    assert rows[2].split()[:5] == ["#1", "x_f32", "(x2", "per", "call)"]
    assert "-" in rows[2].split()  # no FLOP: no GFLOP/s
    assert lines[-1] == (
        "calls    scheduled 4.000 ms per call, 75% in dispatches (80% of the 3.750 ms timed); "
        "IREE default 5.000 ms per call, 90% in dispatches"
    )
    assert profile.builds["scheduled"].fraction_in_dispatches == pytest.approx(0.75)
    assert profile.builds["scheduled"].fraction_of_timed == pytest.approx(0.8)
    assert profile.builds["baseline"].fraction_of_timed is None
    data = profile.as_dict()
    assert data["profiling_mode"] == "host-execution" and data["statistic"] == "median"
    assert data["dispatches"][0]["speedup"] == pytest.approx(2.0)
    assert data["dispatches"][0]["scheduled"]["label"] == "#0 matmul_64x64x64_f32"
    assert [pair["paired_by"] for pair in json.loads(json.dumps(data))["dispatches"]] == [
        "description",
        "unpaired",
        "unpaired",
    ]


def test_a_pair_matched_by_work_is_marked_in_the_table() -> None:
    profile = _dispatch_profile()
    first, x_alone, y_alone = profile.pairs
    by_work = DispatchPair(x_alone.scheduled, y_alone.baseline, "work")
    lines = profile_lines(dataclasses.replace(profile, pairs=(first, by_work)))
    assert any(line.startswith("#1 y_f32 *") for line in lines)
    assert "* paired by equal FLOP per call" in lines[-2]


def test_the_roofline_is_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "roofline.png"
    plot_roofline(_dispatch_profile(), png, "f (x86, 2 threads): dispatches on the roofline")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000


def test_plotting_without_matplotlib_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(PlotError, match=r"pip install 'tdsched\[plot\]'"):
        require_matplotlib()


@pytest.fixture
def run_command(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    """``tdsched run ARGS`` in this process: (exit status, stderr)."""

    def call(*args: str) -> tuple[int, str]:
        try:
            code = main(["run", *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, capsys.readouterr().err

    return call


def test_plot_without_profile_and_profile_without_timing_are_refused(
    run_command: Callable[..., tuple[int, str]], tmp_path: Path
) -> None:
    png = str(tmp_path / "r.png")
    assert run_command("matmul_x86", "--plot", png) == (
        2,
        "tdsched: error: --plot draws the profile's dispatches: add --profile\n",
    )
    assert run_command("matmul_x86", "--profile", "--no-time") == (
        2,
        "tdsched: error: --profile times the builds: drop --no-time\n",
    )


def test_plot_without_matplotlib_is_refused_before_the_run(
    run_command: Callable[..., tuple[int, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    code, err = run_command("matmul_x86", "--profile", "--plot", str(tmp_path / "r.png"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("tdsched: error: --plot needs matplotlib") and "tdsched[plot]" in err


def test_short_dispatches_keep_three_significant_digits() -> None:
    profile = _dispatch_profile()
    first = profile.pairs[0]
    assert first.scheduled is not None
    short = dataclasses.replace(first.scheduled, time_ms=0.000412)
    lines = profile_lines(
        dataclasses.replace(profile, pairs=(DispatchPair(short, None, "unpaired"),))
    )
    assert lines[2].split()[4] == "0.000412"
