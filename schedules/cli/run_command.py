"""``tdsched run RECIPE``: build, check against the reference and time against IREE default
(and the peers) in one process; print the report as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tdsched.targets.dispatch_profile import ProfileError
from tdsched.targets.target import run_conditions

from ..dsl.params import parse_override
from ..measure.profile_report import profile_lines
from ..measure.request import Request
from ..measure.roofline_plot import plot_roofline, require_matplotlib
from ..measure.run_report import RunReport, RunRequest, run_isolated
from ..measure.status import Status
from .args import build_target_from, non_negative_int, positive_int, trust_from
from .output_paths import writes
from .recipe_options import add_recipe_arguments


def add_parser(sub: Any) -> None:
    runp = sub.add_parser(
        "run",
        help="compile, check numerics vs the reference, time vs IREE default",
        description="Compile the scheduled workload and IREE's default build of the same "
        "workload, check the scheduled result against the reference (numpy for generated "
        "workloads, IREE default for .mlir files) on seeded random inputs, and time both, "
        "interleaved in one process. The baseline takes the recipe's 'baseline: {flags: "
        "[...]}' (e.g. --iree-opt-data-tiling); 'metrics: [bandwidth]' adds GB/s against a "
        "memory probe timed in the same run. Workloads that do arithmetic get GFLOP/s and "
        "the share of this machine's FMA peak, measured once per machine, thread count and "
        "IREE version and cached (see 'tdsched peak'). --peers also builds, checks and "
        "times, in the same interleaved run, what a user would pick instead: IREE with "
        "data tiling, with and without microkernels (x86), and numpy where the workload "
        "has an equivalent (matmul, matmul_bias_relu). --profile also times each "
        "dispatch of both builds with IREE's HAL profiling and relates it to its FLOP, bytes "
        "and kernel schedule; --plot draws them on this machine's roofline. Exit status is 0 "
        "only when status is ok.",
    )
    add_recipe_arguments(runp)
    runp.add_argument("--json", action="store_true", help="print one JSON object")
    runp.add_argument(
        "--repeats", type=positive_int, default=7, help="timed samples per variant (default 7)"
    )
    runp.add_argument(
        "--seed", type=non_negative_int, default=0, help="random input seed (default 0)"
    )
    runp.add_argument("--no-time", action="store_true", help="check numerics only")
    runp.add_argument(
        "--peers",
        action="store_true",
        help="also time IREE data tiling (with and without microkernels, x86) and numpy "
        "(where the workload has an equivalent) in the same run",
    )
    runp.add_argument(
        "--no-peak",
        action="store_true",
        help="do not report GFLOP/s against the machine's measured FMA peak (skips "
        "measuring it when it is not cached yet)",
    )
    runp.add_argument(
        "--keep-temps",
        action="store_true",
        help="keep the build files (input module, scripts, .vmfb) and print their folder; "
        "the report's compile_command then re-runs as it is",
    )
    runp.add_argument(
        "--profile",
        action="store_true",
        help="after the run, time each dispatch of the scheduled build and of IREE default "
        "with IREE's HAL profiling (iree-benchmark-module; x86: host-execution, Vulkan: "
        "device timestamps), --repeats rounds: median time per call, share of the call, "
        "GFLOP/s, GB/s and %% of the roof (measured peak), the kernel schedule that built "
        "it, paired with IREE default's dispatch doing the same (JSON: 'profile')",
    )
    plot = runp.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="with --profile: draw the dispatches on this machine's roofline (FLOP per byte "
        "vs GFLOP/s, IREE default -> schedule) into PNG (needs tdsched[plot])",
    )
    writes(runp, plot)


def run(args: argparse.Namespace) -> int:
    if args.plot is not None and not args.profile:
        raise ValueError("--plot draws the profile's dispatches: add --profile")
    if args.profile and args.no_time:
        raise ValueError("--profile times the builds: drop --no-time")
    if args.plot is not None:
        require_matplotlib()
    request = RunRequest(
        Request(
            recipe=args.recipe,
            build=build_target_from(args),
            params=dict(parse_override(text) for text in args.param),
            seed=args.seed,
            trust=trust_from(args),
        ),
        repeats=args.repeats,
        time_it=not args.no_time,
        peers=args.peers,
        peak=not args.no_peak,
        out_dir=tempfile.mkdtemp(prefix="tdsched-run-") if args.keep_temps else None,
        profile=args.profile,
    )
    try:
        report = run_isolated(request)
    except ProfileError as exc:
        raise ValueError(f"--profile: {exc}") from exc
    finally:
        if request.out_dir:
            print(f"tdsched: build files kept in {request.out_dir}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print_report(report)
    if args.profile and report.profile is None:
        print(
            "tdsched: no profile: only a build that ran and was timed (status ok) is profiled",
            file=sys.stderr,
        )
    elif report.profile is not None and args.plot is not None:
        where = run_conditions(report.target, report.threads)
        title = f"{report.recipe} ({where}): dispatches on the roofline"
        plot_roofline(report.profile, args.plot, title)
        print(f"tdsched: wrote {args.plot}", file=sys.stderr)
    return 0 if report.status is Status.OK else 1


def print_report(report: RunReport) -> None:
    """The report as the text ``tdsched run`` prints without ``--json``."""
    where = run_conditions(report.target, report.threads)
    print(f"recipe   {report.recipe} on {where} ({report.workload})")
    status = f"status   {report.status}"
    if report.max_abs_error is not None:
        status += f"  (max abs error {report.max_abs_error:.3g} vs {report.reference})"
    print(status)
    if report.baseline_check is not None:
        print(f"checked  {_baseline_check_line(report)}")
    if report.reference_note:
        print(f"checked  against {report.reference} only: {report.reference_note}")
    if report.shape_entry:
        print(f"shapes   {report.shape_entry['description']}")
    for applied in report.applied or ["nothing: IREE's own pipeline builds every dispatch"]:
        print(f"applied  {applied}")
    for skipped in report.skipped or ():
        print(f"skipped  {skipped}")
    if report.error:
        print(f"error    {report.error}")
    if report.evaluated_by:
        print(f"checked  by the {report.evaluated_by}")
    if report.time_ms and report.baseline_ms and report.speedup:
        t, b = report.time_ms, report.baseline_ms
        print(f"time     {t.median:.3f} ms median (min {t.min:.3f}, max {t.max:.3f})")
        print(f"baseline {b.median:.3f} ms median ({report.baseline}, same run, interleaved)")
        interval = report.speedup_interval
        spread = f" (95% interval {interval[0]:.2f}-{interval[1]:.2f}x)" if interval else ""
        print(f"speedup  {report.speedup:.2f}x vs {report.baseline}{spread}, per-round median")
    bw = report.bandwidth
    if bw is not None:
        print(
            f"traffic  {bw.traffic_bytes / 1e6:.1f} MB: scheduled {bw.scheduled_gbps:.1f} GB/s, "
            f"baseline {bw.baseline_gbps:.1f} GB/s, memory probe {bw.probe_gbps:.1f} GB/s "
            f"({bw.fraction_of_probe:.0%} of the probe)"
        )
    _print_throughput(report)
    if report.profile is not None:
        print("\n".join(profile_lines(report.profile)))


def _baseline_check_line(report: RunReport) -> str:
    """IREE default's results against the workload's own reference, in words."""
    check = report.baseline_check
    assert check is not None
    error = check["max_abs_error"]
    at = f"max abs error {error:.3g}" if error is not None else str(check["error"])
    line = f"IREE default vs {report.reference}: {check['status']} ({at})"
    if check["status"] == str(Status.OK):
        return line
    if report.status is Status.WRONG:
        return f"{line}; both builds are wrong: the lowering or IREE is the likely cause"
    return f"{line}; the schedule is timed against a wrong build"


def _print_throughput(report: RunReport) -> None:
    tp = report.throughput
    if tp is not None:
        bound = (
            " (a lower bound: " + ", ".join(tp.uncounted) + " not counted)" if tp.uncounted else ""
        )
        print(
            f"compute  {tp.flops / 1e9:.3g} GFLOP{bound}: scheduled {tp.scheduled_gflops:.1f} "
            f"GFLOP/s, baseline {tp.baseline_gflops:.1f} GFLOP/s"
        )
        print(
            f"peak     {tp.fraction_of_fma_peak:.0%} of this machine's FMA peak "
            f"({tp.peak.fma_gflops:.1f} GFLOP/s measured on "
            f"{run_conditions(report.target, tp.peak.threads)}, "
            f"memory {tp.peak.bandwidth_gbps:.1f} GB/s)"
        )
    for peer in report.peers or []:
        if peer.time_ms is None or peer.speedup is None:
            print(f"peer     {peer.name}: {peer.check.status} ({peer.check.error}), not timed")
            continue
        rate = f", {peer.gflops:.1f} GFLOP/s" if peer.gflops else ""
        print(
            f"peer     {peer.name}: {peer.time_ms.median:.3f} ms{rate}; "
            f"scheduled is {peer.speedup:.2f}x vs it"
        )
