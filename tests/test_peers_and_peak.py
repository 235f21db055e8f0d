"""``tdsched run --peers`` (IREE data tiling, microkernels and numpy timed in the same run)
and the machine's measured peak (``tdsched peak``, GFLOP/s and % of peak in ``run``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import tdsched
from onnx_models import mlp_model
from tdsched.schedules.cli.peak_command import vector_line
from tdsched.schedules.measure.peers import IREE_PEERS, NUMPY, ONNXRUNTIME, peer_names
from tdsched.targets.target import make_target

SIZE = {"M": 128, "N": 96, "K": 64}
PARAMS = [arg for name, value in SIZE.items() for arg in ("--param", f"{name}={value}")]


def test_iree_peers_are_cpu_only_and_numpy_needs_an_equivalent() -> None:
    assert peer_names(make_target("x86"), True) == [*IREE_PEERS, NUMPY]
    assert peer_names(make_target("x86"), False) == list(IREE_PEERS)
    assert peer_names(make_target("vulkan"), True) == [NUMPY]
    # onnxruntime (installed with tdsched[onnx], as the test extra is) for ONNX models on CPUs
    assert peer_names(make_target("x86"), False, True) == [*IREE_PEERS, ONNXRUNTIME]
    assert peer_names(make_target("vulkan"), False, True) == []


@pytest.mark.usefixtures("iree")
def test_an_onnx_model_is_timed_against_onnxruntime(tmp_path: Path) -> None:
    mlp_model(tmp_path / "mlp.onnx")
    recipe = tmp_path / "mlp.yaml"
    recipe.write_text(
        "name: mlp\ndescription: IREE's pipeline on an ONNX file\n"
        "workload: {file: mlp.onnx}\ntargets: [x86]\nkernels: []\n"
    )
    args = ["--peers", "--json", "--repeats", "2", "--threads", "1"]
    report = json.loads(tdsched("run", str(recipe), *args).stdout)
    assert report["status"] == "ok" and report["reference"] == "onnx-reference", report
    peers = {peer["name"]: peer for peer in report["peers"]}
    assert list(peers) == [*IREE_PEERS, ONNXRUNTIME]
    ort = peers[ONNXRUNTIME]
    assert ort["status"] == "ok" and ort["max_abs_error"] < 1e-4, ort
    # Timed in a block of its own, like numpy: the ratio of the medians.
    assert ort["speedup"] == pytest.approx(ort["time_ms"]["median"] / report["time_ms"]["median"])


@pytest.mark.usefixtures("iree")
@pytest.mark.serial  # compares two ways of taking a ratio of 2 rounds: a busy machine skews one
def test_run_peers_are_checked_and_timed_in_the_same_run() -> None:
    proc = tdsched("run", "matmul_x86", "--peers", "--json", "--repeats", "2", *PARAMS)
    report = json.loads(proc.stdout)
    assert report["status"] == "ok", report
    peers = {peer["name"]: peer for peer in report["peers"]}
    assert list(peers) == ["iree-data-tiling", "iree-data-tiling-ukernels", "numpy"]
    time = report["time_ms"]["median"]
    for peer in peers.values():
        assert peer["status"] == "ok" and peer["max_abs_error"] < 1e-3, peer
        by_medians = peer["time_ms"]["median"] / time
        if peer["name"] == "numpy":  # timed in a block of its own: the ratio of the medians
            assert peer["speedup"] == pytest.approx(by_medians)
        else:  # timed in the schedule's rounds: the median of per-round ratios
            assert peer["speedup"] == pytest.approx(by_medians, rel=0.5)
    flops = 2 * SIZE["M"] * SIZE["N"] * SIZE["K"]
    throughput = report["throughput"]
    assert throughput["flops"] == flops and throughput["uncounted"] == []
    assert throughput["scheduled_gflops"] == pytest.approx(flops / (time * 1e-3) / 1e9)
    assert peers["numpy"]["gflops"] == pytest.approx(
        flops / (peers["numpy"]["time_ms"]["median"] * 1e-3) / 1e9
    )
    peak = throughput["peak"]
    assert peak["threads"] == 2 and peak["target"] == "x86" and peak["fma_gflops"] > 1
    assert throughput["fraction_of_fma_peak"] == pytest.approx(
        throughput["scheduled_gflops"] / peak["fma_gflops"]
    )


@pytest.mark.usefixtures("iree")
def test_run_prints_the_share_of_the_peak_and_each_peer() -> None:
    proc = tdsched("run", "matmul_bias_relu_x86", "--peers", "--repeats", "2", *PARAMS)
    assert proc.returncode == 0, proc.stderr
    assert "of this machine's FMA peak" in proc.stdout
    assert "peer     numpy:" in proc.stdout and "scheduled is" in proc.stdout


@pytest.mark.usefixtures("iree")
def test_the_peak_is_measured_once_per_machine_and_cached(tmp_path: Path) -> None:
    env = {**os.environ, "TDSCHED_CACHE_DIR": str(tmp_path)}

    def peak(*args: str) -> dict[str, object]:
        command = [sys.executable, "-m", "tdsched.schedules.cli.main", "peak", "--json", *args]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        return dict(json.loads(proc.stdout))

    first = peak("--threads", "1")
    assert first["threads"] == 1 and first["target"] == "x86"
    assert float(str(first["fma_gflops"])) > 1 and float(str(first["bandwidth_gbps"])) > 0.1
    by_chains = first["fma_gflops_by_chains"]  # the probe at each chain count; the best counts
    assert isinstance(by_chains, dict) and set(by_chains) == {"4", "7", "12"}
    assert first["fma_gflops"] == max(by_chains.values())
    assert peak("--threads", "1") == first  # from the cache
    cached = json.loads((tmp_path / "machine_peak.json").read_text())
    assert list(cached.values()) == [first]
    peak("--threads", "1", "--refresh")
    assert len(json.loads((tmp_path / "machine_peak.json").read_text())) == 1


@pytest.mark.usefixtures("iree")
def test_a_cached_peak_below_a_measured_rate_is_measured_again(tmp_path: Path) -> None:
    from tdsched.schedules.measure.machine_peak import _key

    stale = {
        "target": "x86",
        "threads": 1,
        "cpu": "a busy machine",
        "iree_version": "0",
        "fma_gflops": 0.001,
        "bandwidth_gbps": 0.001,
        "measured_at": "2000-01-01T00:00:00Z",
    }
    key = _key(make_target("x86"), 1)
    (tmp_path / "machine_peak.json").write_text(json.dumps({key: stale}))
    env = {**os.environ, "TDSCHED_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "tdsched.schedules.cli.main", "run", "matmul_x86", "--json"]
    command += ["--threads", "1", "--repeats", "2", *PARAMS]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    peak = json.loads(proc.stdout)["throughput"]["peak"]
    assert peak["fma_gflops"] > 1 and peak["measured_at"] != stale["measured_at"]
    assert json.loads((tmp_path / "machine_peak.json").read_text())[key] == peak


@pytest.mark.parametrize(
    ("cpu", "features", "line"),
    [
        ("haswell", None, "avx2 (haswell): 16 registers of 8 f32"),
        ("znver4", None, "avx512 (znver4): 32 registers of 16 f32"),
        ("znver4", "-avx512f", "avx2 (znver4): 16 registers of 8 f32"),
    ],
)
def test_peak_names_the_vector_isa_and_its_register_file(
    cpu: str, features: str | None, line: str
) -> None:
    """What a register tile must fit in (the walkthrough derives its tiles from it)."""
    assert vector_line(argparse.Namespace(cpu=cpu, cpu_features=features)) == line
