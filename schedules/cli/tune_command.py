"""``tdsched tune MODEL``: tune a model's tasks within a budget into one recipe
(:mod:`.scheduler`), then run that recipe against the model's own reference."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tdsched.targets.compiler import check_gpu
from tdsched.targets.target import run_conditions
from tdsched.targets.workload import check_memory

from ..base.text_table import aligned
from ..dsl.recipe import recipe_name
from ..frontends.recipe_trust import Trust, trust_options
from ..measure.request import Request
from ..measure.roofline_plot import require_matplotlib
from ..measure.run_report import RunReport, RunRequest, run_recipe
from ..measure.status import Status
from ..sweep.executors import EXECUTORS
from ..tune.blame import UNBLAMED, blame_packed, blame_schedules
from ..tune.budget import AFTER_PER_PROFILE, Budget
from ..tune.iree_race import race_iree_configurations
from ..tune.outcome import TuneOutcome
from ..tune.plot import plot_tune
from ..tune.races import (
    ModelRewrites,
    prune_conv_rewrites,
    race_layouts,
    race_model_rewrites,
)
from ..tune.scheduler import tune
from ..tune.state import read_state, record_finish
from ..tune.tolerance import widened, widened_line
from ..tune.tuning import TuneOptions
from .args import build_target_from, fraction, minutes, positive_int, run_command
from .lower_command import lower, model_args
from .output_paths import check_output, writes
from .tasks_command import add_profiled_model_arguments

DESCRIPTION = """\
Make MODEL faster within a time budget, task by task, and write one recipe for it.

First, graph rewrites that change which ops the dispatches hold (conv1x1_to_matmul,
then im2col) are raced on the whole model, each on top of those kept: a rewrite is kept
when the model runs correct and 1.02x faster with it. One that loses on every
convolution is raced again per group of identical convolutions, selected by layer. A
run within 10% of that bar is a close call, decided on the medians of three runs of
each side. The `graph` lines say what was raced and kept (OUT/graph-race.json keeps the
decision for later runs; its time counts in --budget).

The model's tasks (as `tdsched tasks` lists them) are weighed by a profile of IREE's
default build. Each task with a share of at least --min-share becomes a workload of its
own and a template recipe under OUT/tasks/ (kept if it is there: edit it to change the
schedule or its space). The tasks are swept in rounds of --round-size candidates, each
candidate checked against IREE's default build of the task and timed against it: every
task once, most time first, then the task whose next round promises the most time per
call.

--budget is wall time of the whole command, every step above and below included: the
graph race and the profile have run when the sweeps start, the steps after the sweeps
are estimated ({AFTER}x the profile's time on a first run, then what the last run into OUT
measured), and the sweeps get the rest, printed before them as the `budget` line.
Every task with a template gets a first round, of at least one wave of --jobs
compiles, untried tasks sharing the sweeps' time equally; a later round never starts
once the sweeps' time is spent, and a round compiles no candidate past its share (the
compiles in flight finish). A budget smaller than the steps before and after the
sweeps plus one wave per task is overrun by that much, and the `budget` line says so.

On x86 a task's template is a kernel schedule (and, for a matmul, the packed mmt4d
layout); on --target vulkan it is a lowering config for IREE's own pipeline, for
contraction tasks only (convolutions become matmuls through the model rewrites raced
first).

The result, OUT/MODEL.tuned.yaml, holds a kernel schedule or config (or, for a matmul
that won packed, an mmt4d graph step) for each task whose best candidate beat IREE's
pipeline; the other tasks keep it, and the recipe says why. It is then run as `tdsched
run` would: checked against the model's own reference and timed against IREE's default
build of the whole model. Where matmul tasks have correct packed candidates it did not take,
OUT/MODEL.packed.yaml packs them all, is run the same way, and replaces the result when
it is faster, on medians of three runs each when the two are within 10% (the `layouts`
line says which was kept).

A schedule right on its task can still make the model fail (wrong results, or a build
that fails). When the kept recipe fails its check, tune searches the schedules to blame:
it checks (numerics only) the recipe without task schedules, then recipes keeping halves
of them (OUT/MODEL.tuned.blameN.yaml), about 2 log2(n) checks for one culprit among n.
The blamed tasks keep IREE's pipeline ("its schedule made the model wrong"; later runs
remember it), the recipe is written and checked again, and the `blame` line says what
was found. When the model fails without any task schedule too, nothing is dropped. A
packed alternative that fails where the tasks' recipe passes is searched the same way
among the tasks it packs (OUT/MODEL.packed.blameN.yaml): the blamed tasks keep their
schedules of the tasks' recipe, and the rest of the packing races again.

The budget is the total over every run into OUT (OUT/tune-state.json keeps what was
spent and found, after every round). Re-running with the same --budget sweeps nothing:
it writes the recipe from what was found and checks it. A larger --budget resumes the
tune and spends only the difference; a tune that was killed resumes the same way, and
every recorded candidate (OUT/tune.db) is reused rather than compiled and timed again.
"""


def add_parser(sub: Any) -> None:
    """Register ``tune`` on the ``tdsched`` subcommand parser."""
    p = sub.add_parser(
        "tune",
        help="tune a model's tasks within a time budget into one recipe",
        description=DESCRIPTION.format(AFTER=f"{AFTER_PER_PROFILE:g}"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_profiled_model_arguments(p)
    p.add_argument(
        "--budget",
        type=minutes,
        default=30.0,
        metavar="MINUTES",
        help="wall time of the whole command in minutes (graph race, profile, sweeps and "
        "the checks after them), the total over every run into --out: a re-run spends "
        "only what is left (default 30)",
    )
    out = p.add_argument(
        "--out",
        type=Path,
        help="folder for the task recipes, the database, the tune's state and the model "
        "recipe, created if missing (default: MODEL's name with .tune, in the current folder)",
    )
    writes(p, out, folder=True)
    p.add_argument(
        "--min-share",
        type=fraction,
        default=0.01,
        help="tune only tasks taking at least this share of IREE default's call (default 0.01)",
    )
    p.add_argument(
        "--round-size",
        type=positive_int,
        default=8,
        help="candidates a task gets per round (default 8)",
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=max(1, os.cpu_count() or 1),
        help="parallel compiles (default: one per core)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where the sweeps compile and time: this machine (local, the default) or a "
        "Ray cluster (ray; see tdsched sweep --help)",
    )
    p.add_argument(
        "--ray-address",
        help="ray: the cluster's address (default: a local cluster, started for each round)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=9,
        help="timed rounds of the final model run (default 9)",
    )
    p.add_argument(
        "--no-check",
        action="store_true",
        help="write the recipe but do not run it at the end (the final check, and on x86 "
        "the race against IREE data tiling with and without microkernels, which makes "
        "the recipe the faster configuration where one beats the schedules)",
    )
    plot = p.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="draw the tune into PNG: the model's estimated speedup after every round "
        "against the budget spent (and the final run's), and the tasks' time per call "
        "before and after (needs tdsched[plot])",
    )
    writes(p, plot)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    """Tune ``args.model``. Exit 0 when the model recipe ran correct (or --no-check), 1
    when it came out wrong or failed."""
    budget = Budget(args.budget * 60)  # the whole command's wall time
    if args.plot is not None:
        require_matplotlib()  # before the tune, not after it
    out: Path = args.out or Path(f"{Path(args.model.partition(':')[0]).stem}.tune")
    check_output(out, "--out", folder=True)  # the default one too
    read_state(out)  # a state file tdsched did not write is refused before any work
    build = build_target_from(args)
    check_gpu(build.compile_target)
    workload = lower(args)
    check_memory(workload)
    # the recipes tune writes are named after the model (a file's stem may hold spaces)
    workload = dataclasses.replace(workload, name=recipe_name(workload.name))
    out.mkdir(exist_ok=True)
    options = TuneOptions(
        build=build,
        budget_s=args.budget * 60,
        min_share=args.min_share,
        round_size=args.round_size,
        jobs=args.jobs,
        seed=args.seed,
        rounds=args.rounds,
        executor=args.executor,
        ray_address=args.ray_address,
    )
    quiet = args.quiet or args.json
    progress = _progress(quiet)
    spec = workload_spec(args, out)
    runs = RunRequest(
        Request(  # each check names its recipe
            recipe="", build=options.build, seed=args.seed, trust=recipe_trust(args)
        ),
        repeats=args.repeats,
        time_it=True,
        peak=False,
    )
    timed = partial(run_recipe, runs)
    rewrites = race_model_rewrites(workload, spec, out, options.build.compile_target, timed)
    for line in rewrites.lines:
        progress(f"tune: {line}")
    outcome = tune(
        rewrites.workload, spec, out, options, progress, budget, rewrites.steps, rewrites.speedup
    )
    sweeps_ended = time.monotonic()
    check = None if args.no_check else timed
    numerics = partial(run_recipe, dataclasses.replace(runs, time_it=False))
    with_peers = partial(run_recipe, dataclasses.replace(runs, peers=True))
    on_cpu = not build.compile_target.is_gpu
    # on a CPU the IREE race follows: a recipe no layout race runs is checked with the
    # peers, and the race takes that run up instead of building the recipe again
    first = with_peers if on_cpu and check is not None else check
    report, layouts, blames = _final_check(outcome, check, numerics, progress, first)
    blame = "\n".join(blames) or None
    iree = None
    if on_cpu and (check is None or _passed(report)):
        if check is not None:
            progress("tune: racing the model recipe against IREE's one-flag configurations")
        target = options.build.compile_target
        prune = partial(
            prune_conv_rewrites,
            workload,
            spec,
            out,
            target,
            timed,
            progress=lambda line: progress(f"tune: {line}"),
        )
        iree = race_iree_configurations(
            outcome, report, with_peers if check else None, check, rewrites.other_layout, prune
        )
        report = iree.report
    # with --no-check the steps after the sweeps did not run: nothing to learn from them
    after_s = None if check is None else time.monotonic() - sweeps_ended
    record_finish(out, budget.spent(), budget.profile_s, after_s)
    outcome.spent_s, outcome.this_run_s = budget.spent(), budget.elapsed()
    if args.plot is not None:
        where = run_conditions(outcome.tasks.target, outcome.tasks.threads)
        title = f"tdsched tune of {outcome.tasks.workload} on {where}"
        plot_tune(outcome, report.speedup if report is not None else None, args.plot, title)
    if args.json:
        document = {
            **_as_json(outcome, report, args.gpu),
            "graph": list(rewrites.lines),
            "layouts": layouts,
            "blame": blame,
            "tolerance": dict(outcome.model.tolerance) if outcome.model else None,
            "iree": {"line": iree.line, "configuration": iree.configuration} if iree else None,
            "plot": str(args.plot) if args.plot is not None else None,
        }
        print(json.dumps(document, indent=2))
    else:
        iree_line = iree.line if iree else None
        print("\n".join(summary_lines(outcome, report, args, layouts, rewrites, blame, iree_line)))
    return 0 if report is None or report.status is Status.OK else 1


def _final_check(
    outcome: TuneOutcome,
    check: Callable[[Path], RunReport] | None,
    numerics: Callable[[Path], RunReport],
    progress: Callable[[str], None],
    first: Callable[[Path], RunReport] | None = None,
) -> tuple[RunReport | None, str | None, list[str]]:
    """Check the model recipe (``check`` ``None``: --no-check), racing the layouts where
    there is a packed alternative, and blame the schedules that make it fail (``first``:
    how the recipe runs when no layout race runs it, ``check`` when None). Returns the
    kept recipe's report, the layout race's line and the blame lines."""
    report, layouts, blames = None, None, []
    if outcome.packed is not None:
        race = race_layouts(outcome, check)
        report, layouts = race.report, race.line
        # Packing that made the model fail where the tasks' recipe passed is blamed, and
        # the rest of the packing races again (each search drops at least one task).
        while race.packed_failure is not None and _passed(report):
            blames.append(blame_packed(outcome, race.packed_failure, numerics, progress))
            if outcome.packed is None:
                break
            race = race_layouts(outcome, check)
            report, layouts = race.report, race.line
    elif check is not None:
        report = (first or check)(outcome.recipe)
    if check is not None and report is not None:
        report, line = _within_iree_s_own_error(outcome, report, first or check)
        if line is not None:
            progress(f"tune: {line.removeprefix('check    ')}")
            blames.append(line)
    if check is not None and report is not None and report.status not in UNBLAMED:
        report, line = blame_schedules(outcome, report, check, numerics, progress)
        blames.append(line)
    return report, layouts, blames


def _within_iree_s_own_error(
    outcome: TuneOutcome, report: RunReport, check: Callable[[Path], RunReport]
) -> tuple[RunReport, str | None]:
    """Where the model recipe is wrong and IREE default's own build missed its tolerance
    against the reference too, write the recipe (and its packed alternative) within
    IREE's error (:mod:`~tdsched.schedules.tune.tolerance`) and check it again with
    ``check``. Returns the report and the line saying so (None: nothing changed)."""
    assert outcome.model is not None
    before = outcome.model.tolerance
    after = widened(report, before)
    if after is None:
        return report, None
    assert report.baseline_check is not None
    line = widened_line(before, after, float(report.baseline_check["max_abs_error"]))
    outcome.model = dataclasses.replace(outcome.model, tolerance=after)
    outcome.kernels = outcome.write_recipe(outcome.recipe)
    outcome.rewrite_packed()
    return check(outcome.recipe), line


def _passed(report: RunReport | None) -> bool:
    return report is not None and report.status is Status.OK


def recipe_trust(args: argparse.Namespace) -> Trust:
    """What the model recipe tune writes needs granted: the user named a Python model
    file on the command line, so the recipe that runs it may run it."""
    return Trust(python_workload=Path(args.model.partition(":")[0]).suffix == ".py")


def workload_spec(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The model recipe's ``workload`` for ``args``: file paths relative to ``out``."""
    model, _, function = args.model.partition(":")
    path = Path(model)
    if path.suffix in (".onnx", ".mlir"):
        spec: dict[str, Any] = {"file": os.path.relpath(path.resolve(), out.resolve())}
        if args.function:
            spec["function"] = args.function
        if args.format != "auto":
            spec["format"] = args.format
        return spec
    name = (
        str(path.resolve()) + (f":{function}" if function else "")
        if path.suffix == ".py"
        else args.model
    )
    spec = {"model": name, "args": model_args(args.arg)}
    if args.via != "builder":
        spec["via"] = args.via
    return spec


def _progress(quiet: bool) -> Any:
    def show(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    return show


def summary_lines(
    outcome: TuneOutcome,
    report: RunReport | None,
    args: argparse.Namespace,
    layouts: str | None = None,
    rewrites: ModelRewrites | None = None,
    blame: str | None = None,
    iree: str | None = None,
) -> list[str]:
    """The per-task table and the end-to-end result (``layouts``: what the layout race
    on the whole model did, if it ran; ``rewrites``: what the model-rewrite race did;
    ``blame``: what the search for schedules that made the model fail found, if one
    ran; ``iree``: what the race against IREE's configurations did, if it ran)."""
    tasks = outcome.tasks
    where = run_conditions(tasks.target, tasks.threads)
    call = f"{tasks.call_ms.median:.3f} ms per call" if tasks.call_ms else "untimed"
    if rewrites is not None and rewrites.steps:
        call += " (of the rewritten model)"
    lines = [
        f"tune of {tasks.workload} on {where}: {len(tasks.tasks)} tasks, "
        f"{outcome.spent_s / 60:.1f} of {args.budget:g} minutes spent (this run "
        f"{outcome.this_run_s / 60:.1f}), IREE default: {call}"
    ]
    rows = [
        ["task", "kind", "root op (loop bounds)", "share", "candidates", "time", "best", "kept"]
    ]
    for t in outcome.tunings:
        rows.append(
            [
                t.task.name,
                t.task.kind,
                t.task.root.describe(),
                f"{t.task.share:.1%}" if t.task.share is not None else "-",
                str(t.candidates) if t.recipe else "-",
                f"{t.spent_s:.0f} s" if t.recipe else "-",
                f"{t.speedup:.2f}x" if t.speedup else "-",
                t.outcome,
            ]
        )
    lines += aligned(rows)
    estimate = outcome.estimated_speedup
    if estimate is not None:
        lines.append(f"estimate {estimate:.2f}x vs IREE default, from the tasks' best speedups")
    lines.append(f"recipe   {outcome.recipe} ({outcome.kernels} task schedules)")
    if report is not None:
        lines.append(
            f"status   {report.status}"
            + (
                f"  (max abs error {report.max_abs_error:.3g} vs {report.reference})"
                if report.max_abs_error is not None
                else ""
            )
        )
        if report.error:
            lines.append(f"error    {report.error}")
        if report.speedup and report.time_ms and report.baseline_ms:
            lines.append(
                f"model    {report.time_ms.median:.3f} ms vs IREE default "
                f"{report.baseline_ms.median:.3f} ms: {report.speedup:.2f}x (same run, "
                f"{args.repeats} rounds)"
            )
    lines += rewrites.lines if rewrites else ()
    if layouts is not None:
        lines.append(layouts)
    if blame is not None:
        lines.append(blame)
    if iree is not None:
        lines.append(iree)
    if args.plot is not None:
        lines.append(f"plot     {args.plot}")
    rerun = build_target_from(args).run_flags()
    lines.append(
        f"run it   {run_command(outcome.recipe, rerun + trust_options(recipe_trust(args)))}"
    )
    return lines


def _as_json(
    outcome: TuneOutcome, report: RunReport | None, gpu: str | None = None
) -> dict[str, Any]:
    return {
        "workload": outcome.tasks.workload,
        "target": outcome.tasks.target,
        "gpu": gpu,
        "threads": outcome.tasks.threads,
        "call_ms": outcome.tasks.call_ms.as_dict() if outcome.tasks.call_ms else None,
        "spent_s": round(outcome.spent_s, 1),
        "this_run_s": round(outcome.this_run_s, 1),
        "recipe": str(outcome.recipe),
        "kernels": outcome.kernels,
        "estimated_speedup": outcome.estimated_speedup,
        "tasks": [t.as_dict() for t in outcome.tunings],
        "run": report.to_json() if report is not None else None,
    }
