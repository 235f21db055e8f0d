"""``tdsched sweep``: the command line of :mod:`tdsched.schedules.sweep.runner`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import iree.compiler.version
from tdsched.targets.cpu_model import BuildCpu
from tdsched.targets.racing import RaceSettings
from tdsched.targets.target import (
    BuildGpu,
    BuildMachine,
    run_conditions,
)

from ..dsl.build_names import gpu_name
from ..dsl.params import INT64, parse_override
from ..dsl.recipe import Recipe
from ..dsl.shape_table import ShapeEntry
from ..frontends.loading import load
from ..frontends.recipe_trust import trust_options
from ..sweep.database import ResultsDB, method
from ..sweep.distinct import parameters_read
from ..sweep.executor import Executor, Limits
from ..sweep.executors import EXECUTORS, make_executor
from ..sweep.freeze import frozen_suffixes, recorded_sweep, write_frozen, write_shape_table
from ..sweep.runner import COST_MODELS, Sweep, SweepOptions, SweepOutcome, SweepState
from ..sweep.strategies import STRATEGIES
from ..sweep.table import (
    baseline_line,
    decision_json,
    decision_line,
    ranked_table,
    result_json,
    reuse_line,
)
from .args import (
    add_cpu_options,
    add_gpu_option,
    add_threads_option,
    add_trust_options,
    build_target_from,
    non_negative_int,
    positive_float,
    positive_int,
    run_command,
    trust_from,
)
from .output_paths import reads, recipe_file, writes

DEFAULT_DB = Path("tdsched-sweeps.db")

DESCRIPTION = """\
Evaluate the parameter space a recipe declares ('space' and 'constraints') and find the
fastest correct candidate on this machine and target.

Candidates that violate a constraint are pruned before compiling (the sweep says how
many, by which constraint). The rest are proposed by the strategy, compiled in parallel
(--jobs), then checked against the reference and screened one at a time with no compile
running (--repeats rounds, each paired with IREE default, giving a speedup and its 95%
interval). IREE's default build is timed first and at the end (drift is reported). The
candidates screening cannot tell apart from the leader (at most 4 x --race) then race:
they and IREE default are timed round after round in one process; after 5 rounds the
best --race go on, and a candidate clearly slower than the leader drops out, until one
is left, the rest are within 2% of it, or
--race-time / --race-rounds run out ("undecided between A and B"). A candidate that fails to
compile, crashes, hangs (--compile-timeout, --run-timeout) or computes wrong results is
recorded as failed and never ranked; the sweep goes on.

The recipe's own values at the swept shape (its shape table's entry there, else its
defaults) are the first candidate of a random, adaptive or model sweep, and race whatever
their screening; a race that ends tied or undecided with them still in it keeps them as
the best. The report says where they ranked.

Every result is written to the SQLite database (--db) the moment it is known, keyed by a
content hash of workload, scripts, target, flags and IREE version: re-running reuses it,
--resume continues an interrupted sweep, --rebench times again. Sweeps sharing a
database keep their own numbers: a result reused from another sweep is shown with that
sweep's measurement (the sweep says which). The best candidate is written as a frozen
recipe (--best-out) that 'tdsched run' accepts unchanged.

With --keep-temps, each candidate the sweep compiles keeps its build folder (input
module, scripts, IREE's per-dispatch files, the .vmfb and compile.sh, the iree-compile
command that rebuilds it) under DB.artifacts/builds/sweepID/, one folder per candidate
named by its swept parameters (TM=32,TN=128); the folder is printed at the end.

With --shape (repeatable), one sweep runs per shape, and the winners go into the
recipe's 'shapes' table instead (--best-out, default DB's folder/RECIPE.TARGET.shapes.yaml):
one entry per shape with the best candidate's parameters, or 'iree_default: true' where
the best candidate is slower than IREE default; 'tdsched run' then picks the entry by
the shape it runs at.
"""

EPILOG = """\
examples:
  tdsched sweep matmul_x86 --param M=512 --param N=512 --param K=512
  tdsched sweep matmul_x86 --strategy adaptive --budget 0.3 --seed 1
  tdsched sweep matmul_x86 --strategy model --budget 0.2     (pip install 'tdsched[model]')
  tdsched sweep matmul_x86 --strategy random --samples 24 --json
  tdsched sweep matmul_vulkan --target vulkan --db vk.db
  tdsched sweep matmul_x86 --resume            continue after an interruption
  tdsched sweep matmul_x86 --shape M=256,N=256,K=256 --shape M=512,N=512,K=512
  tdsched report tdsched-sweeps.db --plot speedup.png --x TM --y TN
"""


def add_parser(sub: Any) -> None:
    """Register ``sweep`` on the ``tdsched`` subcommand parser."""
    p = sub.add_parser(
        "sweep",
        help="search a recipe's parameter space; record results; write the best recipe",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    recipe = p.add_argument("recipe", help="recipe file (.yaml, .py) or shipped recipe name")
    reads(p, recipe, recipe_file)
    p.add_argument("--target", choices=("x86", "vulkan"), help="default: the recipe's first")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="fix a parameter for every candidate (a swept one leaves the space)",
    )
    p.add_argument("--strategy", choices=STRATEGIES, default="grid", help="default: grid")
    p.add_argument(
        "--cost-model",
        choices=COST_MODELS,
        default="auto",
        help="adaptive: what ranks its proposals: learned (gradient-boosted trees, needs "
        "pip install 'tdsched[model]'; learns from the database too), additive (per-value "
        "means of this sweep), auto (learned when scikit-learn is installed; default)",
    )
    p.add_argument(
        "--samples", type=positive_int, default=20, help="random: candidates (default 20)"
    )
    p.add_argument(
        "--budget",
        type=positive_float,
        default=0.3,
        help="adaptive/model: candidates to evaluate, a count or a fraction of the valid "
        "ones (default 0.3)",
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="random/adaptive/model and input seed"
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=os.cpu_count() or 1,
        help="parallel compiles (default: cores)",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        help="screening rounds per candidate, each paired with IREE default (5)",
    )
    p.add_argument(
        "--sample-ms",
        type=positive_float,
        default=20.0,
        help="milliseconds of back-to-back calls per timing sample (20)",
    )
    add_threads_option(p)
    add_trust_options(p)
    p.add_argument(
        "--race",
        "--confirm",
        type=positive_int,
        default=8,
        help="candidates that race on after the first 5 rounds; up to 4N enter (default 8)",
    )
    p.add_argument(
        "--race-time",
        type=positive_float,
        default=10.0,
        help="seconds of timing after which the race stops, decided or not (10)",
    )
    p.add_argument(
        "--race-rounds",
        type=positive_int,
        default=40,
        help="rounds after which the race stops, decided or not (40)",
    )
    p.add_argument(
        "--compile-timeout", type=positive_float, default=300.0, help="seconds (default 300)"
    )
    p.add_argument(
        "--run-timeout", type=positive_float, default=120.0, help="seconds (default 120)"
    )
    db = p.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"results (default {DEFAULT_DB})"
    )
    writes(p, db)
    p.add_argument("--resume", action="store_true", help="continue an interrupted sweep")
    p.add_argument("--rebench", action="store_true", help="time again even when recorded")
    p.add_argument(
        "--bench-during-compile",
        action="store_true",
        help="time candidates while others compile (faster, noisier)",
    )
    p.add_argument(
        "--keep-temps",
        action="store_true",
        help="keep each compiled candidate's build folder (input module, scripts, IREE's "
        "per-dispatch files, .vmfb, compile.sh) under DB.artifacts/builds/sweepID/, named "
        "by its swept parameters; the folder is printed at the end",
    )
    best_out = p.add_argument(
        "--best-out",
        type=Path,
        help="frozen best recipe (default: DB's folder/RECIPE.TARGET.best.yaml; with "
        "--shape, RECIPE.TARGET.shapes.yaml)",
    )
    writes(p, best_out)
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        type=shape_arg,
        metavar="NAME=V,NAME=V",
        help="sweep at this shape (repeatable; every --shape names the same parameters, "
        "the table's key) and write the winners as a shape table; a value that is not a "
        "number keys by a string parameter (M=128,N=3072,K=768,WEIGHTS=constant)",
    )
    remote = p.add_mutually_exclusive_group()
    bundle = remote.add_argument(
        "--bundle",
        type=Path,
        metavar="DIR",
        help="compile the candidates here and write them as a bench bundle into DIR (a new "
        "folder): the modules, IREE default's build, seeded inputs, reference outputs and "
        "the runner; nothing is timed here. Run 'python DIR/bench.py' on the machine with "
        "the device (it needs only iree-base-runtime and numpy), then this command again "
        "with --import DIR/results.json instead of --bundle (docs/commands/bench.md). "
        "Strategies grid and random",
    )
    writes(p, bundle, folder=True)
    imported = remote.add_argument(
        "--import",
        dest="import_results",
        type=Path,
        metavar="RESULTS",
        help="record the results file a bundle's bench.py wrote (each candidate screened "
        "and the leaders raced, on the device) into the sweep that wrote the bundle (give "
        "the --bundle command's recipe, options and --db), then finish it: ranked table, "
        "race, best recipe",
    )
    reads(p, imported)
    p.add_argument("--top", type=positive_int, default=10, help="rows of the ranked table (10)")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    p.add_argument("--executor", choices=EXECUTORS, default="local", help="default: local")
    p.add_argument("--ray-address", help="ray: cluster address (default: start a local one)")
    add_cpu_options(p)
    add_gpu_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no live progress")


def _executor(args: argparse.Namespace) -> Executor:
    limits = Limits(args.compile_timeout, args.run_timeout)
    return make_executor(args.executor, args.jobs, limits, args.ray_address)


def _progress(quiet: bool) -> Any:
    tty = sys.stderr.isatty()

    def show(event: str, state: SweepState) -> None:
        if quiet:
            return
        if event == "note":
            print(f"sweep: {state.message}", file=sys.stderr)
            return
        eta = state.eta_s()
        best = state.best
        best_text = (
            f"leader {best.speedup:.3f}x ({state.describe(best)})"
            if best and best.speedup
            else "leader -"
        )
        line = (
            f"[{state.done}/{state.planned}] {event:8s} failed {state.failed}  "
            f"ETA {'-' if eta is None else time.strftime('%M:%S', time.gmtime(eta))}  {best_text}"
        )
        print(("\r" + line.ljust(100)) if tty else line, end="" if tty else "\n", file=sys.stderr)

    return show


def shape_arg(text: str) -> dict[str, int | str]:
    """``M=256,N=256,K=256`` → ``{"M": 256, ...}`` (argparse type of ``--shape``); a value
    that is not a number is a string key value (``WEIGHTS=constant``)."""
    shape: dict[str, int | str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        value = value.strip()
        number = value.isdigit() and int(value) > 0
        if number and int(value) not in INT64:
            raise argparse.ArgumentTypeError(
                f"{part}: {name.strip()} does not fit in 64 bits (< 2**63); give a size the "
                "machine can hold, e.g. M=256,N=256,K=256"
            )
        word = value.isidentifier()
        if not sep or not name.strip() or not (number or word):
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected NAME=VALUE pairs separated by commas, each value a "
                "positive integer (a size) or a name (a string key such as "
                "WEIGHTS=constant), e.g. M=256,N=256,K=256"
            )
        if name.strip() in shape:
            raise argparse.ArgumentTypeError(f"{text!r}: {name.strip()} is given twice")
        shape[name.strip()] = int(value) if number else value
    return shape


def run(args: argparse.Namespace) -> int:
    """``tdsched sweep``. Exit 0 when a correct candidate was found (at every shape, with
    --shape), 1 when not."""
    fixed = dict(parse_override(p) for p in args.param)
    _check_best_out(args)
    if args.shape:
        if args.bundle or args.import_results:
            raise ValueError("--bundle and --import sweep one shape: leave out --shape")
        return _sweep_shapes(args, fixed)
    if args.import_results and not args.db.is_file():
        raise ValueError(
            f"--import: there is no database {args.db}; give the --db of the --bundle command"
        )
    sweep, outcome = _sweep(args, fixed)
    if outcome.bundle is not None:
        record = {"sweep": outcome.sweep_id, **outcome.bundle}
        print(json.dumps(record, indent=2) if args.json else _bundle_summary(outcome, args))
        return 0
    best_file = _write_best(sweep, outcome, args)
    if args.json:
        print(json.dumps(_as_json(outcome, best_file), indent=2))
    else:
        print(_summary(outcome, best_file, args.top, _build_flags(sweep)))
    return 0 if outcome.ranked else 1


def _check_best_out(args: argparse.Namespace) -> None:
    """Before the sweep: ``--best-out`` is written exactly where it says, so its suffix
    must say what it holds (a Python recipe's best is Python, the rest YAML)."""
    source = recipe_file(args.recipe)
    if args.best_out is None or source is None:
        return
    allowed = frozen_suffixes(source, bool(args.shape))
    if args.best_out.suffix not in allowed:
        what = "a shape table" if args.shape else f"the best of a {source.suffix} recipe"
        raise ValueError(
            f"--best-out {args.best_out}: {what} is a {allowed[0]} file; "
            f"name it {args.best_out.with_suffix(allowed[0])}"
        )


def _build_flags(sweep: Sweep) -> list[str]:
    """The ``tdsched run`` options that rebuild what the sweep measured (a frozen recipe
    or table keeps the parameters, not these), and the grants its recipe needed."""
    return sweep.build.run_flags() + trust_options(sweep.options.trust)


def _sweep(args: argparse.Namespace, fixed: dict[str, Any]) -> tuple[Sweep, SweepOutcome]:
    """One sweep with ``fixed`` parameters, recorded in the database."""
    options = SweepOptions(
        build=build_target_from(args),
        fixed=fixed,
        strategy=args.strategy,
        cost_model=args.cost_model,
        samples=args.samples,
        budget=args.budget,
        seed=args.seed,
        repeats=args.repeats,
        race=RaceSettings(
            keep=args.race,
            max_rounds=args.race_rounds,
            time_cap_s=args.race_time,
            sample_s=args.sample_ms / 1e3,
        ),
        rebench=args.rebench,
        resume=args.resume,
        bench_during_compile=args.bench_during_compile,
        keep_temps=args.keep_temps,
        trust=trust_from(args),
        bundle=args.bundle,
        imported=args.import_results,
    )
    db = ResultsDB(args.db)
    try:
        sweep = Sweep(args.recipe, options, db, _executor(args), args.jobs, _progress(args.quiet))
        if not args.quiet:
            notes = [*sweep.enumeration.pruning_lines(), sweep.cost_model_line]
            print("\n".join(n for n in notes if n), file=sys.stderr)
        # stdout is for the result alone; libraries print there too (Ray's driver reports
        # its workers' deaths), so during the sweep it goes to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            outcome = sweep.run()
    finally:
        db.close()
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)
    _announce_kept(outcome)
    return sweep, outcome


def _bundle_summary(outcome: SweepOutcome, args: argparse.Namespace) -> str:
    """What ``--bundle`` wrote, and the two commands that follow."""
    assert outcome.bundle is not None
    folder = Path(outcome.bundle["folder"])
    failed = f"; {len(outcome.failed)} failed to build (recorded)" if outcome.failed else ""
    return "\n".join(
        [
            f"sweep {outcome.sweep_id}: wrote the bench bundle {folder}: "
            f"{len(outcome.bundle['builds'])} candidates and IREE default's build, to be "
            f"checked and timed on the device{failed}",
            "next, on the machine with the device (pip install iree-base-runtime numpy): "
            f"python {folder / 'bench.py'}",
            f"then, here: this tdsched sweep command again with --import "
            f"{shlex.quote(str(folder / 'results.json'))} in place of --bundle {args.bundle}",
        ]
    )


def _announce_kept(outcome: SweepOutcome) -> None:
    """With --keep-temps, say on stderr where the candidates' build folders are."""
    if outcome.build_files is None:
        return
    if not outcome.compiled:
        print(
            "tdsched: --keep-temps: this sweep compiled no candidate (it reused earlier "
            "builds), so it kept no build files",
            file=sys.stderr,
        )
        return
    print(
        f"tdsched: build files kept in {outcome.build_files} ({outcome.compiled} "
        "candidates compiled by this sweep, a folder each, named by its swept parameters)",
        file=sys.stderr,
    )


def _sweep_shapes(args: argparse.Namespace, fixed: dict[str, Any]) -> int:
    """One sweep per ``--shape``; the winners written as the recipe's shape table."""
    key = list(args.shape[0])
    for shape in args.shape:
        if list(shape) != key:
            raise ValueError(
                f"every --shape must name the same parameters in the same order (the "
                f"table's key): {','.join(key)} vs {','.join(shape)}"
            )
    _check_shape_names(key, load(args.recipe))
    done: list[tuple[dict[str, int | str], SweepOutcome]] = []
    sweep = None
    for shape in args.shape:
        if not args.quiet:
            print(f"== shape {_label(shape)}", file=sys.stderr)
        sweep, outcome = _sweep(args, {**fixed, **shape})
        done.append((shape, outcome))
        if not args.json:
            print(f"== shape {_label(shape)}\n{_summary(outcome, None, args.top)}\n")
    assert sweep is not None
    built_for = sweep.build.machine
    cpu = built_for if isinstance(built_for, BuildCpu) else None
    tuned_for: dict[str, int | str | None] = {
        "threads": sweep.build.cpu_threads,
        "isa": cpu.isa if cpu else None,
        "cpu": cpu.model if cpu else None,
        "gpu": gpu_name(built_for) if isinstance(built_for, BuildGpu) else None,
    }
    key = _table_key(done[0][1].recipe, key)
    entries = [
        _table_entry(
            _completed(shape, key, fixed, outcome.recipe), fixed, outcome, tuned_for, built_for
        )
        for shape, outcome in done
        if outcome.ranked
    ]
    table = None
    if entries:
        out = (
            args.best_out
            or args.db.parent / f"{done[0][1].recipe.name}.{done[0][1].target}.shapes.yaml"
        )
        provenance = {
            "swept_recipe": _relative(sweep.path, out.parent),
            "database": _relative(args.db, out.parent),
            "sweeps": [outcome.sweep_id for _, outcome in done],
            "target": done[0][1].target,
            "threads": sweep.build.cpu_threads,
            "iree_version": iree.compiler.version.VERSION,
        }
        if sweep.build.gpu is not None:
            provenance["gpu"] = sweep.build.gpu
        written = write_shape_table(sweep.path, out, key, entries, done[0][1].target, provenance)
        table = written.path
        for old in written.replaced:
            origin = old.get("note") or "the recipe's own"
            print(
                f"note: {table}: this sweep's entry for {_entry_label(old, key)} replaces the "
                f"one the table had ({origin})",
                file=sys.stderr,
            )
    missing = [_label(shape) for shape, outcome in done if not outcome.ranked]
    if args.json:
        shapes = [{"shape": shape, **_as_json(outcome, None)} for shape, outcome in done]
        print(json.dumps({"shapes": shapes, "table": str(table) if table else None}, indent=2))
    else:
        for entry in entries:
            print(f"entry {_label({k: entry[k] for k in key})}: {entry['note']}")
        if missing:
            print(f"no correct candidate at {', '.join(missing)}: no entry written for it")
        if table is not None:
            rerun = run_command(table, _build_flags(sweep))
            print(f"shape table: {table}  ({rerun} --param ...)")
    return 0 if not missing else 1


def _check_shape_names(names: list[str], recipe: Recipe) -> None:
    """Refuse a ``--shape`` name that is not a parameter of ``recipe``, or one its space
    sweeps: a shape fixes the workload's parameters, the sweep chooses the others."""
    swept = {axis.name for axis in recipe.space.axes}
    shapes = [name for name in recipe.parameter_dict if name not in swept]
    for name in names:
        if name in swept or name not in recipe.parameter_dict:
            what = "'s space sweeps" if name in swept else " has no parameter"
            raise ValueError(
                f"--shape {name}: {recipe.name}{what} {name}; a shape sets the parameters "
                f"it does not sweep: {', '.join(shapes) or 'it has none'}"
            )


def _table_key(recipe: Recipe, named: list[str]) -> list[str]:
    """The key the entries are written with: the recipe table's, where ``--shape`` names
    some of its parameters (``M,N,K`` of a table keyed by ``M, N, K, WEIGHTS``), else the
    names ``--shape`` gives."""
    table = recipe.shapes
    if table is not None and set(named) < set(table.key):
        return list(table.key)
    return named


def _completed(
    shape: dict[str, int | str], key: list[str], fixed: dict[str, Any], recipe: Recipe
) -> dict[str, int | str]:
    """``shape`` with a value for every ``key`` parameter it does not name: the one
    ``--param`` gives, else the recipe's default (the value the sweep ran with)."""
    defaults = recipe.parameter_dict
    return {name: shape[name] if name in shape else fixed.get(name, defaults[name]) for name in key}


def _label(shape: dict[str, int | str]) -> str:
    return ",".join(f"{name}={value}" for name, value in shape.items())


def _entry_label(entry: dict[str, Any], key: list[str]) -> str:
    """``M=64,N=64 (2 threads, avx512, znver4)``: a written table entry's shape and what it
    was tuned for, as ``tdsched run`` names entries."""
    return ShapeEntry(
        tuple((k, entry[k]) for k in key),
        threads=entry.get("threads"),
        isa=entry.get("isa"),
        cpu=entry.get("cpu"),
        gpu=entry.get("gpu"),
    ).label


def _table_entry(
    shape: dict[str, int | str],
    fixed: dict[str, Any],
    outcome: SweepOutcome,
    tuned_for: dict[str, int | str | None],
    built_for: BuildMachine,
) -> dict[str, Any]:
    """The table entry a sweep at ``shape`` earned, for where it ran (``tuned_for``: the
    CPU ``threads``, vector ``isa`` and ``cpu`` model, each None on a GPU or when
    unknown, and the Vulkan ``gpu``, None on x86; ``built_for``: that CPU or GPU): its
    best candidate's parameters, or IREE default when even the best is slower than it;
    the note says how sure it is. Either way the
    entry keeps the ``--param`` values (they define what was measured, e.g. ``PAD=0``);
    of the best candidate's swept values it keeps those its build reads (a layout's
    parameters, not the other layouts')."""
    best = outcome.ranked[0]
    decision = outcome.decision
    standing = decision.standing(best.key) if decision else None
    if standing is not None and decision is not None:
        s = standing.speedup
        note = (
            f"sweep {outcome.sweep_id}: {s.median:.3f}x [{s.low:.3f}, {s.high:.3f}] vs "
            f"IREE default after {standing.rounds} rounds, race {decision.race.verdict}"
        )
        speedup = s.median
    else:
        speedup = best.speedup or 0.0
        note = f"sweep {outcome.sweep_id}: {speedup:.3f}x vs IREE default (not raced)"
    tuned_for = {name: value for name, value in tuned_for.items() if value is not None}
    given = {k: v for k, v in fixed.items() if k not in shape}
    if speedup < 1.0:
        note += "; IREE default is faster"
        return {**shape, **tuned_for, **given, "iree_default": True, "note": note}
    values = {**fixed, **shape, **best.params}
    read = parameters_read(outcome.recipe, values, outcome.target, outcome.threads, built_for)
    tuned = {k: v for k, v in best.params.items() if k not in shape and k in read}
    return {**shape, **tuned_for, **given, **tuned, "note": note}


def _write_best(sweep: Sweep, outcome: SweepOutcome, args: argparse.Namespace) -> Path | None:
    if not outcome.ranked:
        return None
    best = outcome.ranked[0]
    out = args.best_out or _best_path(args.db, outcome, sweep.path.suffix)
    decision = outcome.decision
    standing = decision.standing(best.key) if decision else None
    provenance: dict[str, Any] = {
        "swept_recipe": _relative(sweep.path, out.parent),
        "database": _relative(args.db, out.parent),
        "sweep": outcome.sweep_id,
        "key": best.key,
        "speedup": round(standing.speedup.median if standing else best.speedup or 0.0, 4),
    }
    if decision and standing:
        margin = decision.race.margin
        provenance["certainty"] = {
            "interval": [round(standing.speedup.low, 4), round(standing.speedup.high, 4)],
            "rounds": standing.rounds,
            "verdict": decision.race.verdict,
            "margin": None if margin is None else round(margin, 4),
        }
    else:
        provenance["certainty"] = {"verdict": "not raced"}
    provenance |= {
        "target": outcome.target,
        "threads": sweep.build.cpu_threads,
        "iree_version": iree.compiler.version.VERSION,
    }
    if not sweep.build.compile_target.is_gpu and sweep.build.cpu != "host":
        provenance["cpu"] = sweep.build.cpu
    if sweep.build.gpu is not None:
        provenance["gpu"] = sweep.build.gpu
    params = {**sweep.options.fixed, **best.params}
    return write_frozen(sweep.path, out, params, outcome.target, provenance)


def _best_path(db: Path, outcome: SweepOutcome, suffix: str) -> Path:
    """``<recipe>.<target>.best.yaml`` (``.py`` for Python recipes) beside the database,
    unless that file holds something else than this sweep's best (another sweep's, or a
    file of the user's): then ``...sweep<ID>.best.yaml``, so a sweep never overwrites
    another result (a note says where it went)."""
    stem = f"{outcome.recipe.name}.{outcome.target}"
    suffix = ".py" if suffix == ".py" else ".yaml"
    out = db.parent / f"{stem}.best{suffix}"
    written_by = recorded_sweep(out)
    if written_by is None or written_by == (_relative(db, out.parent), outcome.sweep_id):
        return out
    other = db.parent / f"{stem}.sweep{outcome.sweep_id}.best{suffix}"
    print(
        f"note: {out} holds the best of another sweep; this sweep's best goes to {other}",
        file=sys.stderr,
    )
    return other


def _relative(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` (frozen recipes move with their folder)."""
    return os.path.relpath(path.resolve(), folder.resolve())


def _summary(
    outcome: SweepOutcome, best_file: Path | None, top: int, rerun: Sequence[str] = ()
) -> str:
    """The sweep's report; ``rerun``: the build options ``tdsched run`` of the best recipe
    needs (:func:`_build_flags`)."""
    e = outcome.enumeration
    how = method(outcome.strategy, outcome.cost_model)
    lines = [
        f"sweep {outcome.sweep_id}: {outcome.recipe.name} on "
        f"{run_conditions(outcome.target, outcome.threads)} ({how}), "
        f"{len(outcome.results)} candidates evaluated of {len(e.valid)} valid "
        f"({e.total} in the space) in {outcome.elapsed_s:.1f} s: "
        f"{outcome.reused} reused, {outcome.compiled} compiled, {outcome.timed} timed, "
        f"{len(outcome.failed)} failed",
    ]
    reused = reuse_line(outcome.reused_from)
    if reused is not None:
        lines.append(f"{reused}; --rebench times them again")
    if outcome.device is not None:
        device = outcome.device
        on = f"{device['device']}, host CPU {device['cpu']}" if device["device"] else device["cpu"]
        lines.append(f"measured on {device['driver']} ({on}) by the bench bundle's runner")
    if outcome.timed or outcome.baseline_ms:
        lines.append(baseline_line(outcome.baseline_ms))
    lines.append(
        ranked_table(outcome.ranked, outcome.failed, e.names, top, outcome.decision, e.ignored)
    )
    if outcome.ranked:
        lines.append(decision_line(outcome.decision, outcome.results, e.names, e.ignored))
    incumbent = outcome.incumbent_line()
    if incumbent is not None:
        lines.append(incumbent)
    if outcome.peers:
        lines.append(_peers_line(outcome))
    if best_file is not None:
        lines.append(f"best recipe: {best_file}  ({run_command(best_file, rerun)})")
        best = _best_speedup(outcome)
        if best is not None and best < 1.0:
            lines.append(
                f"warning: the best candidate is slower than {outcome.recipe.baseline.label} "
                f"({best:.3f}x): no schedule in this space pays off here; keep IREE's build, "
                "or widen the space"
            )
    elif not outcome.ranked:
        lines.append("no candidate compiled and matched the reference")
    return "\n".join(lines)


def _peers_line(outcome: SweepOutcome) -> str:
    """IREE's other builds as the device measured them, and the best candidate against the
    fastest of them (a bundle's import)."""
    shown = [
        f"{name} {found.speedup.median:.3f}x" if found.speedup else f"{name} {found.status}"
        for name, found in outcome.peers.items()
    ]
    line = "peers    measured on the device, vs IREE default: " + ", ".join(shown)
    fastest = max((f.speedup.median for f in outcome.peers.values() if f.speedup), default=None)
    best = _best_speedup(outcome)
    if fastest and best:
        line += f"; the best candidate ({best:.3f}x) is {best / fastest:.2f}x the fastest of them"
    return line


def _as_json(outcome: SweepOutcome, best_file: Path | None) -> dict[str, Any]:
    e = outcome.enumeration
    return {
        "sweep": outcome.sweep_id,
        "recipe": outcome.recipe.name,
        "target": outcome.target,
        "strategy": outcome.strategy,
        "cost_model": outcome.cost_model,
        "space": {
            "parameters": list(e.names),
            "total": e.total,
            "valid": len(e.valid),
            "pruned": [{"reason": r, "count": n} for r, n in e.pruned],
        },
        "evaluated": len(outcome.results),
        "reused": outcome.reused,
        "compiled": outcome.compiled,
        "timed": outcome.timed,
        "elapsed_s": outcome.elapsed_s,
        "baseline_ms": outcome.baseline_ms,
        "drift": outcome.drift,
        "ranked": [result_json(r, outcome.decision, e.names, e.ignored) for r in outcome.ranked],
        "failed": [r.as_dict() for r in outcome.failed],
        "best": result_json(outcome.ranked[0], outcome.decision, e.names, e.ignored)
        if outcome.ranked
        else None,
        "decision": decision_json(outcome.decision, outcome.results, e.names),
        "best_recipe": str(best_file) if best_file else None,
        "reused_from": {str(sweep): n for sweep, n in outcome.reused_from.items()},
        "build_files": str(outcome.build_files) if outcome.build_files else None,
        "incumbent": _incumbent_json(outcome),
    }


def _incumbent_json(outcome: SweepOutcome) -> dict[str, Any] | None:
    """The recipe's own values at the swept shape and where they ranked (``rank``: 1 for
    the best; None where they failed or are no candidate)."""
    incumbent = outcome.incumbent
    if incumbent is None:
        return None
    point = incumbent.point
    place = incumbent.place(outcome.ranked, outcome.incumbent_key)
    return {
        "source": incumbent.source,
        "params": None if point is None else outcome.enumeration.as_params(point),
        "key": outcome.incumbent_key,
        "rank": None if place is None else place + 1,
        "why_not": incumbent.why_not,
        "line": outcome.incumbent_line(),
    }


def _best_speedup(outcome: SweepOutcome) -> float | None:
    """The best candidate's speedup: raced when it raced, else screened."""
    if not outcome.ranked:
        return None
    best = outcome.ranked[0]
    standing = outcome.decision.standing(best.key) if outcome.decision else None
    return standing.speedup.median if standing else best.speedup
