"""``tdsched sweep --shape`` fills a recipe's shape table, and ``tdsched run`` picks the
entry by the shape it runs at (real IREE builds and timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_process import tdsched
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.frontends.loading import load
from tdsched.targets.cpu_isa import host_isa
from tdsched.targets.cpu_model import build_cpu, host_cpu_model

pytestmark = pytest.mark.usefixtures("iree")

SMALL_SPACE = ["--param", "TN=32", "--param", "TK=32", "--param", "RN=16", "--param", "RM=8"]
FAST = ["--repeats", "3", "--race", "2", "--race-time", "2", "--jobs", "2", "--quiet"]


def test_a_sweep_per_shape_writes_a_table_that_run_selects_from(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    proc = tdsched(
        "sweep", "matmul_x86", *SMALL_SPACE, *FAST, "--db", str(db), "--json",
        "--shape", "M=64,N=64,K=64", "--shape", "M=128,N=128,K=128",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [s["shape"] for s in report["shapes"]] == [
        {"M": 64, "N": 64, "K": 64},
        {"M": 128, "N": 128, "K": 128},
    ]
    table_file = Path(report["table"])
    assert table_file == tmp_path / "matmul_x86.x86.shapes.yaml"
    table = yaml.safe_load(table_file.read_text())["shapes"]
    shipped = load("matmul_x86").shapes
    # --shape names M, N, K of a table keyed by M, N, K, WEIGHTS too: the entries take
    # the value the sweep ran with (the default, input weights)
    assert shipped is not None and table["key"] == ["M", "N", "K", "WEIGHTS"]
    # The shipped table's entries stay; the swept shapes get entries for where the sweep
    # ran (2 threads, the default; this machine's ISA and CPU model), each replacing the
    # shipped entry for that place where there is one.
    here = (2, host_isa(), host_cpu_model())
    by_place = {
        (e["M"], e["N"], e["K"], e["WEIGHTS"], e.get("threads"), e.get("isa"), e.get("cpu")): e
        for e in table["entries"]
    }
    shipped_places = {(*(v for _, v in e.shape), e.threads, e.isa, e.cpu) for e in shipped.entries}
    swept_places = {(n, n, n, "input", *here) for n in (64, 128)}
    assert set(by_place) == shipped_places | swept_places
    assert len(table["entries"]) == len(by_place)
    for swept in report["shapes"]:
        shape = swept["shape"]
        entry = by_place[(shape["M"], shape["N"], shape["K"], "input", *here)]
        assert entry["note"].startswith(f"sweep {swept['sweep']}: ")
        if not entry.get("iree_default"):
            # the --param values stay; of the swept ones, those the winner's build reads
            # (UNPACK is read by the conditions that choose the layout: it stays too)
            best = swept["best"]["params"]
            assert entry["TN"] == 32 and entry["LAYOUT"] == best["LAYOUT"]
            assert entry["UNPACK"] == best["UNPACK"]
            if best["LAYOUT"] == "rowmajor":
                assert entry["TM"] == best["TM"]
            else:
                assert "TM" not in entry  # the row-major tiles: read by no kept step

    ran = tdsched("run", str(table_file), "--json", "--no-time", "--param", "M=100",
                  "--param", "N=100", "--param", "K=96")  # fmt: skip
    result = json.loads(ran.stdout)
    assert result["status"] == "ok", result
    chosen = result["shape_entry"]
    # the nearest entry whose tiles fit 100x100x96 (a row-major winner at 128^3 whose
    # tiles leave partial ones there is skipped), as resolving the written table says
    expected = resolve(load(str(table_file)), {"M": 100, "N": 100, "K": 96}, 2, "x86", build_cpu())
    assert expected.shape_choice is not None and expected.shape_choice.entry is not None
    assert chosen["entry"] == expected.shape_choice.entry.shape_label
    assert chosen["how"] == "nearest"
    assert "nearest to M=100,N=100,K=96" in chosen["description"]


def test_shapes_must_share_one_key(tmp_path: Path) -> None:
    proc = tdsched("sweep", "matmul_x86", "--db", str(tmp_path / "s.db"),
                   "--shape", "M=64,N=64,K=64", "--shape", "M=64,N=64")  # fmt: skip
    assert proc.returncode == 2
    assert "every --shape must name the same parameters" in proc.stderr


@pytest.mark.usefixtures("vulkan")
def test_vulkan_entries_are_keyed_by_the_gpu_built_for(tmp_path: Path) -> None:
    # one candidate per shape; an ampere build runs on lavapipe too (checked numerically)
    one = ["--target", "vulkan", "--param", "TM=32", "--param", "TN=32", "--param", "TK=4"]
    shape = ["--shape", "M=64,N=64,K=64"]
    db = ["--db", str(tmp_path / "s.db")]
    ampere = tmp_path / "ampere.yaml"
    proc = tdsched("sweep", "matmul_vulkan", *one, *FAST, *db, *shape, "--gpu", "ampere",
                   "--best-out", str(ampere))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"(tdsched run {ampere} --gpu ampere --param ...)" in proc.stdout
    written = yaml.safe_load(ampere.read_text())
    assert written["provenance"]["gpu"] == "ampere"
    assert written["provenance"]["threads"] is None  # no CPU threads on Vulkan
    # the table swept again for IREE's generic target keeps the ampere entry beside
    # the generic one
    both = tmp_path / "both.yaml"
    proc = tdsched("sweep", str(ampere), *one, *FAST, *db, *shape, "--best-out", str(both))
    assert proc.returncode == 0, proc.stderr
    entries = yaml.safe_load(both.read_text())["shapes"]["entries"]
    assert sorted(e["gpu"] for e in entries) == ["ampere", "generic"]
    assert not any("threads" in e or "isa" in e or "cpu" in e for e in entries)

    def chosen(*gpu: str) -> dict[str, object]:
        ran = tdsched("run", str(both), "--target", "vulkan", *gpu, "--json", "--no-time",
                      "--param", "M=64", "--param", "N=64", "--param", "K=64")  # fmt: skip
        result = json.loads(ran.stdout)
        assert result["status"] == "ok", result
        return dict(result["shape_entry"])

    assert chosen("--gpu", "ampere")["entry_gpu"] == "ampere"
    generic = chosen()
    assert (generic["entry_gpu"], generic["gpu"], generic["how"]) == ("generic", "generic", "exact")
