# PYTHON_ARGCOMPLETE_OK
"""The ``tdsched`` command line: show, apply, compile, run, sweep and regression-gate
schedule recipes, and lower models to the linalg they schedule."""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import argcomplete
import iree.compiler.version
from tdsched.targets.compiler import VERBOSE_ENV, CompileError, format_command
from tdsched.targets.dispatch_profile import ProfileError
from tdsched.targets.ir_eval import DEFAULT_ATOL, DEFAULT_RTOL, check_files
from tdsched.targets.runtime import DeviceError
from tdsched.targets.target import TARGET_NAMES, run_conditions

from . import list_command, lower_command, peak_command, schema_command
from .build_folders import EXECUTABLES, kept_temps, with_executable_dumps
from .cli_types import (
    add_cpu_options,
    add_gpu_option,
    add_threads_option,
    build_target_from,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from .emit import ScriptStage
from .loading import load, shipped_recipe_names
from .measure.status import Status
from .output_paths import check_paths, reads, recipe_file, writes
from .params import parse_override
from .pipeline import Plan, apply_graph, build, compile_plan, kernels_after_schedule, plan
from .profile_report import profile_lines
from .recipe_trust import add_trust_options, trust_from
from .regress import command as regress_command
from .roofline_plot import plot_roofline, require_matplotlib
from .run_report import RunReport, RunRequest, run_isolated
from .step_trace import (
    StepSelector,
    StepTrace,
    parse_step_selector,
    recipe_schedules,
    select_steps,
    trace,
)
from .step_views import explain_json, explain_text, ir_text
from .sweep import command as sweep_command
from .sweep import report_command
from .tune import command as tune_command
from .tune import tasks_command

SEPARATOR = "// -----"

_DESCRIPTION = """\
tdsched: say *how* a linalg workload is computed, as a schedule recipe (YAML or Python),
and get transform-dialect scripts that IREE obeys on x86 (llvm-cpu) and Vulkan.

A RECIPE is a path to a .yaml/.py recipe or the name of a shipped one (e.g. matmul_x86).
Parameters declared by the recipe can be overridden with --param NAME=VALUE.
"""

_EPILOG = """\
examples:
  tdsched show matmul_x86                      print the generated transform scripts
  tdsched apply matmul_x86                     IR after the graph schedule and each kernel schedule
  tdsched explain matmul_x86                   loop nest before and after each schedule step
  tdsched apply matmul_x86 --step tile --diff  what each tile step changed in the IR
  tdsched compile matmul_x86 -o mm.vmfb --print-command
  tdsched run matmul_x86 --json                check vs numpy and time vs IREE default
  tdsched run matmul_vulkan --target vulkan --param TM=32
  tdsched check before.mlir after.mlir         same results in numpy? (payload schedules)
  tdsched sweep matmul_x86 --param M=512 --param N=512 --param K=512
                                               search the recipe's space, write the best
  tdsched report tdsched-sweeps.db --plot s.png --x TM --y TN
  tdsched regress perf.yaml                    gate recipes against a committed baseline
  tdsched lower small_cnn --layers             a model lowered to linalg (builder, ONNX, TOSA)
  tdsched list                                 the shipped recipes
  tdsched schema -o tdsched-recipe.schema.json JSON Schema of recipe files, for editors
"""


def _version() -> str:
    """``tdsched X (IREE Y, Python Z)``: what a bug report needs."""
    try:
        ours = importlib.metadata.version("tdsched")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        ours = "unknown"
    python = ".".join(map(str, sys.version_info[:3]))
    return f"tdsched {ours} (IREE {iree.compiler.version.VERSION}, Python {python})"


def _complete_recipe(prefix: str, **_: object) -> list[str]:
    """Shell completion of a RECIPE: shipped names, then recipe files and folders."""
    names = [n for n in shipped_recipe_names() if n.startswith(prefix)]
    paths = sorted(glob.glob(prefix + "*"))
    files = [p + "/" if os.path.isdir(p) else p for p in paths]
    return names + [f for f in files if f.endswith(("/", ".yaml", ".yml", ".py"))]


def _add_common(parser: argparse.ArgumentParser) -> None:
    recipe = parser.add_argument("recipe", help="recipe file (.yaml, .py) or shipped recipe name")
    recipe.completer = _complete_recipe  # type: ignore[attr-defined]
    reads(parser, recipe, recipe_file)
    parser.add_argument(
        "--target",
        choices=TARGET_NAMES,
        help="target to build for (default: the recipe's first)",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a recipe parameter (repeatable)",
    )
    add_cpu_options(parser)
    add_gpu_option(parser)
    add_threads_option(parser)
    add_trust_options(parser)


def make_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    parser = argparse.ArgumentParser(
        prog="tdsched",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print every iree-compile command line to stderr as it runs (also in the "
        "child processes of run, sweep and regress)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    show = sub.add_parser(
        "show",
        help="print the generated transform scripts",
        description="Print the graph script (@__transform_main, applied to the whole module "
        "before dispatch formation) and the kernel library (@__kernel_config, passed to "
        f"iree-compile), separated by '{SEPARATOR}' lines "
        "(iree-opt --split-input-file reads them).",
    )
    _add_common(show)

    apply = sub.add_parser(
        "apply",
        help="print the IR after the graph schedule and after each kernel schedule",
        description="Print the module after the graph schedule (what iree-compile receives), "
        "then, for each strategy kernel schedule, its dispatch function right after the "
        "schedule's steps (before bufferization and lowering).",
    )
    _add_common(apply)
    apply.add_argument(
        "--input", type=Path, help="apply to this .mlir module instead of the recipe's workload"
    )
    _add_step_options(apply, "print the IR after")
    apply.add_argument(
        "--diff",
        action="store_true",
        help="print, for each step (or each --step), the unified diff of the IR before and "
        "after it instead of the whole IR; a step that changed nothing is flagged",
    )

    explain = sub.add_parser(
        "explain",
        help="print the loop nest before each schedule and after each of its steps",
        description="For the graph schedule (on the module) and each kernel schedule (on "
        "each dispatch it applies to), print the loop nest read from the IR before the "
        "first step and after every step: each scf.for / scf.forall with its range, step, "
        "trip count and role (parallel, reduction; a forall's workgroup or thread mapping), "
        "and in each body the linalg ops with their operand shapes and the vector ops with "
        "their vector types. Lines marked + and - are what the step changed; a step that "
        "changed nothing, or failed (e.g. left a handle empty), is flagged with '!'.",
    )
    _add_common(explain)
    explain.add_argument(
        "--input", type=Path, help="explain on this .mlir module instead of the recipe's workload"
    )
    _add_step_options(explain, "print the loop nest after")
    explain.add_argument("--json", action="store_true", help="print one JSON object")

    comp = sub.add_parser(
        "compile",
        help="compile with IREE and write the scripts beside the output",
        description="Compile the recipe's workload with its schedules. The input module and "
        "scripts are written next to OUTPUT (OUTPUT minus .vmfb plus .input.mlir, "
        ".graph.mlir, .kernels.mlir) so the printed iree-compile command reproduces the build. "
        "Intermediate files (the probe compiles of kernel-level fuse_ext) go to a temporary "
        "folder that is removed, unless --keep-temps.",
    )
    _add_common(comp)
    output = comp.add_argument("-o", "--output", type=Path, required=True, help="output .vmfb")
    writes(comp, output)
    comp.add_argument("--print-command", action="store_true", help="print the iree-compile command")
    comp.add_argument(
        "--keep-temps",
        action="store_true",
        help="keep the intermediate files, and IREE's per-dispatch files (LLVM IR, assembly, "
        "objects or SPIR-V, binaries, benchmark modules) under executables/, in a folder "
        "printed on stderr; the .vmfb is the same",
    )

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
    _add_common(runp)
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

    sweep_command.add_parser(sub)
    report_command.add_parser(sub)
    regress_command.add_parser(sub)
    lower_command.add_parser(sub)
    schema_command.add_parser(sub)
    list_command.add_parser(sub)
    peak_command.add_parser(sub)
    tasks_command.add_parser(sub)
    tune_command.add_parser(sub)

    check = sub.add_parser(
        "check",
        help="check that two .mlir modules compute the same results (numpy evaluation)",
        description="Evaluate the entry function of BEFORE and AFTER (tensor-level linalg, "
        "tensor, scf, arith, math and affine ops, including host-level scf.for/scf.forall "
        "loops that IREE cannot compile) in numpy, in float64, on the same seeded random "
        "inputs, and compare each result. Exit status: 0 equivalent, 1 mismatch, 2 error.",
    )
    check.add_argument("before", type=Path, metavar="BEFORE", help="the reference module")
    check.add_argument("after", type=Path, metavar="AFTER", help="the transformed module")
    check.add_argument(
        "--function", help="public entry function (default: BEFORE's only public one)"
    )
    check.add_argument(
        "--seed", type=non_negative_int, default=0, help="random input seed (default 0)"
    )
    check.add_argument(
        "--rtol",
        type=non_negative_float,
        default=DEFAULT_RTOL,
        help=f"tolerance relative to max|BEFORE result| (default {DEFAULT_RTOL:g})",
    )
    check.add_argument(
        "--atol",
        type=non_negative_float,
        default=DEFAULT_ATOL,
        help=f"absolute tolerance (default {DEFAULT_ATOL:g})",
    )
    check.add_argument(
        "--dynamic-size",
        type=positive_int,
        metavar="N",
        help="evaluate a function with dynamic dims (tensor<?x...>) with N, N+1, ... for "
        "the dynamic dims of its arguments, each its own size except dims BEFORE's ops "
        "make equal (required for such functions)",
    )
    check.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _add_step_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--step",
        action="append",
        type=_step_selector,
        metavar="[SCHEDULE:]N|PRIMITIVE",
        help=f"{what} only this step (repeatable): its number (from 1) or primitive name "
        "(every step of it), optionally after the schedule's name ('graph' or a kernel "
        "name), e.g. 3, tile, matmul:2, graph:fuse_ext; a bare number selects that step in "
        "every schedule that has it",
    )


def _step_selector(text: str) -> StepSelector:
    try:
        return parse_step_selector(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _plan(args: argparse.Namespace, **extra: object) -> Plan:
    overrides = dict(parse_override(text) for text in args.param)
    p = plan(
        load(args.recipe, trust_from(args)),
        build_target_from(args),
        overrides,
        **extra,  # type: ignore[arg-type]
    )
    if p.recipe.shape_choice is not None:
        print(f"tdsched: {p.recipe.shape_choice.describe()}", file=sys.stderr)
    for skipped in p.recipe.skipped:
        print(f"tdsched: {skipped.describe()}", file=sys.stderr)
    return p


def _show(args: argparse.Namespace) -> int:
    p = _plan(args)
    parts = []
    if all(isinstance(stage, ScriptStage) for stage in p.scripts.graph):
        for stage in p.scripts.graph:
            assert isinstance(stage, ScriptStage)
            parts.append(
                "// graph schedule: whole module, applied before dispatch formation\n"
                + stage.script
            )
    else:
        # fuse_ext plans its transform steps on the payload: run the graph to know them.
        for script in apply_graph(p).scripts:
            parts.append("// graph schedule step (whole module)\n" + script)
    library = p.scripts.kernel_library
    if p.scripts.kernel_fusions:
        # Kernel-level fuse_ext is planned on the dispatch sources: build them first.
        with tempfile.TemporaryDirectory(prefix="tdsched-show-") as tmp:
            files = build(p, Path(tmp))
            assert files.kernel_library is not None
            library = files.kernel_library.read_text()
    if library:
        parts.append(
            f"// kernel library for {p.target.name}: pass with "
            "--iree-codegen-transform-dialect-library\n" + library
        )
    if not parts:
        print(f"// recipe {p.recipe.name} has no schedules")
    print(f"\n{SEPARATOR}\n".join(parts), end="")
    return 0


def _traced(args: argparse.Namespace) -> tuple[StepTrace, set[tuple[str, int]] | None]:
    """The recipe's step trace and the steps ``--step`` selects (``None``: all)."""
    p = _plan(args, input_file=args.input, trace_steps=True)
    selected = select_steps(recipe_schedules(p), args.step) if args.step else None
    return trace(p), selected


def _trace_failed(found: StepTrace) -> int:
    if found.failure is None:
        return 0
    print(f"tdsched: error: {found.failure}", file=sys.stderr)
    return 2


def _explain(args: argparse.Namespace) -> int:
    found, selected = _traced(args)
    if args.json:
        print(json.dumps(explain_json(found, selected), indent=2))
    else:
        print("\n".join(explain_text(found, selected)))
    return _trace_failed(found)


def _apply(args: argparse.Namespace) -> int:
    if args.step or args.diff:
        found, selected = _traced(args)
        print("\n".join(ir_text(found, selected, args.diff)))
        return _trace_failed(found)
    p = _plan(args, input_file=args.input, print_after_schedule=True)
    with tempfile.TemporaryDirectory(prefix="tdsched-apply-") as tmp:
        files = build(p, Path(tmp))
        for report in files.reports:
            print("\n".join(f"// {line}" for line in report.splitlines()))
        print(f"// module after the graph schedule ({p.recipe.name}, {p.target.name})")
        print(files.input_file.read_text(), end="")
        after = kernels_after_schedule(p, files) if p.scripts.kernel_library else {}
    for kernel in p.recipe.kernels:
        print(SEPARATOR)
        if kernel.config is not None:
            print(
                f"// kernel '{kernel.name}': config only, "
                "IREE's pipeline runs with its lowering config"
            )
            continue
        print(f"// kernel '{kernel.name}': dispatch function after its schedule steps")
        print(after.get(kernel.name, "// (no dispatch printed)"))
    return 0


def _compile(args: argparse.Namespace) -> int:
    p = _plan(args)
    output: Path = args.output
    with kept_temps(args.keep_temps, "tdsched-compile-") as scratch:
        if args.keep_temps:
            p = with_executable_dumps(p, scratch / EXECUTABLES)
        files = build(p, output.parent, stem=output.with_suffix("").name, scratch=scratch)
        result = compile_plan(p, files, output)
    if args.print_command:
        print(format_command(result.command))
    print(f"wrote {output}", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.plot is not None and not args.profile:
        raise ValueError("--plot draws the profile's dispatches: add --profile")
    if args.profile and args.no_time:
        raise ValueError("--profile times the builds: drop --no-time")
    if args.plot is not None:
        require_matplotlib()
    request = RunRequest(
        recipe=args.recipe,
        build=build_target_from(args),
        params=dict(parse_override(text) for text in args.param),
        repeats=args.repeats,
        seed=args.seed,
        time_it=not args.no_time,
        peers=args.peers,
        peak=not args.no_peak,
        out_dir=tempfile.mkdtemp(prefix="tdsched-run-") if args.keep_temps else None,
        profile=args.profile,
        trust=trust_from(args),
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
        _print_report(report)
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


def _print_report(report: RunReport) -> None:
    where = run_conditions(report.target, report.threads)
    print(f"recipe   {report.recipe} on {where} ({report.workload})")
    status = f"status   {report.status}"
    if report.max_abs_error is not None:
        status += f"  (max abs error {report.max_abs_error:.3g} vs {report.reference})"
    print(status)
    if report.baseline_check is not None:
        print(f"checked  {_baseline_check_line(report)}")
    if report.shape_entry:
        print(f"shapes   {report.shape_entry['description']}")
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
        print(f"speedup  {report.speedup:.2f}x vs {report.baseline}")
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


def _check(args: argparse.Namespace) -> int:
    report = check_files(
        args.before,
        args.after,
        args.function,
        seed=args.seed,
        rtol=args.rtol,
        atol=args.atol,
        dynamic_size=args.dynamic_size,
    )
    print(json.dumps(report.to_json(), indent=2) if args.json else report.format_table())
    return 0 if report.equivalent else 1


_COMMANDS = {
    "show": _show,
    "apply": _apply,
    "explain": _explain,
    "compile": _compile,
    "run": _run,
    "check": _check,
    "sweep": sweep_command.run,
    "report": report_command.run,
    "regress": regress_command.run,
    "lower": lower_command.run,
    "schema": schema_command.run,
    "list": list_command.run,
    "peak": peak_command.run,
    "tasks": tasks_command.run,
    "tune": tune_command.run,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tdsched`` console script."""
    parser = make_parser()
    argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"
    try:
        check_paths(args)
        return _COMMANDS[args.command](args)
    # RecipeError, ScheduleError and workload errors are ValueErrors.
    except (ValueError, CompileError, DeviceError) as exc:
        print(f"tdsched: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tdsched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`tdsched report DB --csv - | head`): stop quietly.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (Python flushes stdout at exit)
        return 0


if __name__ == "__main__":
    sys.exit(main())
