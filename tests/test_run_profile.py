"""``tdsched run --profile`` and ``--plot`` through the real IREE compiler, runtime and
profiling tools (iree-benchmark-module, iree-profile), on x86 and Vulkan (lavapipe)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import tdsched

# the profile's per-dispatch times are compared with the calls': one at a time (.ci/test)
pytestmark = pytest.mark.serial

IN_DISPATCHES = 0.15
"""How far the dispatches' times may be from the whole call (see docs/commands/run.md:
fixed per-call costs, ~60 us here, stay below it for calls of a millisecond or more)."""


def _profile(*args: str) -> dict[str, Any]:
    proc = tdsched("run", *args, "--profile", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "ok", report
    profile: dict[str, Any] = report["profile"]
    profile["report"] = report
    return profile


def _rows(profile: dict[str, Any], build: str) -> list[dict[str, Any]]:
    return [pair[build] for pair in profile["dispatches"] if pair[build] is not None]


def _assert_dispatches_make_up_the_call(profile: dict[str, Any]) -> None:
    """Each build's dispatch times sum to its call within IN_DISPATCHES of its rounds: at
    least the fastest round (less would mean dispatches went uncounted) and at most the
    slowest. Load on the machine delays rounds; on Vulkan the device is lavapipe on the same
    CPU, and on a VM with steal time (a 2-core Xeon: rounds of one build from 5.5 to 9.5
    ms) the x86 dispatches too, so their sum may reach the slowest round, never more."""
    for name, build in profile["builds"].items():
        rows = _rows(profile, name)
        assert build["in_dispatches_ms"] == pytest.approx(sum(r["time_ms"] for r in rows))
        assert sum(r["share"] for r in rows) == pytest.approx(build["fraction_in_dispatches"])
        timed = profile["report"]["time_ms" if name == "scheduled" else "baseline_ms"]["median"]
        assert build["timed_ms"] == timed
        assert build["fraction_of_timed"] == pytest.approx(build["in_dispatches_ms"] / timed)
        fastest = build["call_ms"]["min"]
        slowest = build["call_ms"]["max"]
        in_dispatches = build["in_dispatches_ms"]
        assert (1 - IN_DISPATCHES) * fastest <= in_dispatches <= (1 + IN_DISPATCHES) * slowest, (
            name,
            build,
        )


@pytest.mark.usefixtures("iree")
def test_resnet_block_dispatches_name_their_kernels_and_add_up_to_the_workload() -> None:
    tiles = {"WH": 4, "RW": 8, "RF": 16, "EXPAND": "schedule", "EP": 56, "EC": 64}
    params = [arg for name, value in tiles.items() for arg in ("--param", f"{name}={value}")]
    profile = _profile("resnet_block_x86", "--threads", "1", *params)
    assert profile["profiling_mode"] == "host-execution" and profile["threads"] == 1
    pairs = profile["dispatches"]
    assert [p["paired_by"] for p in pairs] == ["description"] * 3
    kernels = ["conv1x1_reduce", "conv3x3", "conv1x1_expand"]
    assert [p["scheduled"]["kernel"] for p in pairs] == kernels
    assert all(p["baseline"]["kernel"] is None for p in pairs)
    assert pairs[1]["scheduled"]["label"] == "#1 conv_56x56x64x3x3x64_f32"
    # The dispatches' work is the whole workload's, counted separately from its IR.
    flops = profile["report"]["throughput"]["flops"]
    for build in ("scheduled", "baseline"):
        assert sum(r["flops"] for r in _rows(profile, build)) == flops
    fma, bandwidth = profile["peak"]["fma_gflops"], profile["peak"]["bandwidth_gbps"]
    for row in _rows(profile, "scheduled"):
        assert row["gflops"] == pytest.approx(row["flops"] / row["time_ms"] / 1e6)
        # The lower roof at the dispatch's intensity: FMA on a machine with the bandwidth
        # of a Zen 5, bandwidth for the 1x1 convolutions on a VM that streams 7 GB/s.
        roofs = {"FMA": row["gflops"] / fma, "bandwidth": row["gbps"] / bandwidth}
        assert row["bound"] == max(roofs, key=roofs.__getitem__)
        assert row["fraction_of_roof"] == pytest.approx(max(roofs.values()))
        assert row["calls"] >= 7 and row["per_call"] == 1
    for pair in pairs:
        assert pair["speedup"] == pytest.approx(
            pair["baseline"]["time_ms"] / pair["scheduled"]["time_ms"]
        )
    _assert_dispatches_make_up_the_call(profile)


@pytest.mark.usefixtures("iree")
@pytest.mark.parametrize(
    ("recipe", "per_call"), [("matmul_bias_relu_x86", 1), ("matmul_chain_x86", 2)]
)
def test_dispatch_times_add_up_to_the_call(recipe: str, per_call: int) -> None:
    profile = _profile(recipe, "--threads", "1", "--no-peak")
    (pair,) = profile["dispatches"]  # matmul_chain: one function IREE dispatches twice
    assert pair["scheduled"]["per_call"] == pair["baseline"]["per_call"] == per_call
    assert pair["scheduled"]["fraction_of_roof"] is None  # --no-peak: no roof
    _assert_dispatches_make_up_the_call(profile)


def test_vulkan_dispatches_are_timed_on_the_device(vulkan: None) -> None:
    # ~0.2 s a call on lavapipe: a call's wait for the device ends on a ~4 ms tick, which
    # would outweigh the dispatches of a call of a few milliseconds (docs/commands/run.md)
    profile = _profile("resnet_block_vulkan", "--repeats", "3")
    assert profile["profiling_mode"] == "dispatch-events" and profile["threads"] is None
    kernels = [pair["scheduled"]["kernel"] for pair in profile["dispatches"]]
    assert kernels == ["conv1x1_reduce", "conv3x3", "conv1x1_expand"]
    flops = profile["report"]["throughput"]["flops"]
    for build in ("scheduled", "baseline"):
        assert sum(r["flops"] for r in _rows(profile, build)) == flops
    _assert_dispatches_make_up_the_call(profile)


@pytest.mark.usefixtures("iree")
def test_the_roofline_plot_is_written_and_the_table_printed(tmp_path: Path) -> None:
    png = tmp_path / "roofline.png"
    sizes = ("--param", "M=128", "--param", "N=128", "--param", "K=128")  # a scheduled entry
    proc = tdsched("run", "matmul_x86", *sizes, "--repeats", "2", "--profile", "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    assert f"tdsched: wrote {png}" in proc.stderr
    assert png.read_bytes().startswith(b"\x89PNG")
    table = proc.stdout[proc.stdout.index("profile  ") :].splitlines()
    assert table[1].split()[:2] == ["dispatch", "build"]
    assert table[2].split()[:4] == ["#0", "matmul_128x128x128_f32", "scheduled", "matmul"]
    assert table[3].split()[:4] == ["#0", "matmul_128x128x128_f32", "default", "IREE"]
    assert table[4].startswith("calls    scheduled ")
