"""Decision quality of ``tdsched sweep``: is the candidate it calls best really the best?

For each case (a recipe and a space of at least 50 candidates):

1. **Grid.** ``tdsched sweep`` over the whole space: compiles every candidate (kept in the
   database's artifacts, so later runs only time) and screens it.
2. **Decisions.** Each policy runs ``--seeds`` times with ``--rebench`` (every candidate
   timed again, inputs drawn with the seed), and its chosen best is recorded with the
   timing it spent (screening plus race, wall seconds of timing in the benchmark
   worker). Policies: ``racing`` (the defaults) and ``confirm3`` (tdsched before
   racing: 50 ms samples, the best 3 re-timed for 5 interleaved rounds).
3. **Reference.** Every correct candidate of the space is timed with IREE default, all
   interleaved in one process, ``--reference-rounds`` rounds of 50 ms samples (long:
   with 1 thread each candidate's median paired speedup is known to a few percent; the
   JSON gives every interval). A decision is a hit when its candidate's reference
   speedup is within 5% of the best reference speedup.
4. **Strategies replayed** on the reference (no timing): ``random``, ``adaptive`` and
   ``model`` with 10%, 15% and 25% of the grid's evaluations, each candidate scored by
   its reference speedup: the best each saw, as a fraction of the reference best, per
   seed; ``adaptive`` with the additive cost model and with the learned one
   (``adaptive_learned``). ``--replay-from RESULT.json`` recomputes the replays of a
   saved result without timing anything (results saved before they kept their
   ``candidates`` need their databases in ``--work``). A failed candidate counts as an
   evaluation that found nothing.

Usage: python benchmarks/sweep_decisions.py --work DIR [--case NAME ...] [--seeds 5]
           [--replay-seeds 20] [--threads 1] [--policy P ...] [--no-decisions]
           [--replay-from RESULT.json]
           [--out result.json]
(``--no-decisions``: grid, reference and replay only, for a large space.)
Run on a quiet machine (nothing else running): every figure is a timing. ``--threads``
defaults to 1: on a 2-core VM, 2 runtime threads beside the timing thread make a module
timed against itself vary by 12% (standard deviation of the per-round ratio) against 3%
with 1 thread, too much for a reference that must separate candidates 5% apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.dsl.params import parse_override
from tdsched.schedules.dsl.space import Point
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.shipped import find_recipe
from tdsched.schedules.measure.request import Request
from tdsched.schedules.sweep.compile_and_bench import Bench
from tdsched.schedules.sweep.cost_model import Featurizer, LearnedModel, ModelGuided
from tdsched.schedules.sweep.database import ResultsDB
from tdsched.schedules.sweep.messages import SweepContext
from tdsched.schedules.sweep.strategies import Evolutionary, RandomSample, Strategy
from tdsched.targets.racing import BASELINE
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.timing import Interval, RoundTimer

CASES = {
    "matmul_256": ["matmul_x86", "M=256", "N=256", "K=256", "RN=32"],
    "matmul_bias_relu_256": ["matmul_bias_relu_fuse_ext_x86", "M=256", "N=256", "K=256", "RN=32"],
    "matmul_512": ["matmul_x86", "M=512", "N=512", "K=512"],
    "mmt4d_512": ["matmul_mmt4d_x86", "M=512", "N=512", "K=512"],
}
DEFAULT_CASES = ["matmul_256", "matmul_bias_relu_256"]
POLICIES = {
    "racing": [],
    "confirm3": ["--race", "3", "--race-rounds", "5", "--sample-ms", "50"],
}
HIT = 0.95
REPLAY_BUDGETS = (0.10, 0.15, 0.25)
"""Replays run each strategy with these fractions of the grid's evaluations."""


def sweep(db: Path, recipe: str, params: list[str], threads: int, *extra: str) -> dict[str, Any]:
    """``tdsched sweep`` in a new process; its JSON report."""
    command = [sys.executable, "-m", "tdsched.schedules.cli.main", "sweep", recipe, "--db", str(db)]
    command += [arg for p in params for arg in ("--param", p)]
    command += ["--json", "-q", "--best-out", str(db.with_suffix(".best.yaml"))]
    command += ["--threads", str(threads), *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def reference(
    db: Path, recipe: str, params: list[str], keys: list[str], rounds: int, threads: int
) -> dict[str, Interval]:
    """Each key's speedup over IREE default, timed all together, interleaved."""
    results = {r.key: r for r in ResultsDB(db, read_only=True).results()}
    (baseline,) = db.with_name(db.name + ".artifacts").glob("baseline-*.vmfb")
    fixed = dict(parse_override(p) for p in params)
    context = SweepContext(
        Request(
            recipe=str(find_recipe(recipe).resolve()),
            build=BuildTarget("x86", threads=threads),
            params=fixed,
        ),
        baseline_artifact=str(baseline),
    )
    bench = Bench(context)
    variants = {BASELINE: bench.baseline.runner(bench.inputs)}
    for key in keys:
        module = LoadedModule(Path(str(results[key].artifact)), bench.driver, bench.function)
        variants[key] = module.runner(bench.inputs)
    timer = RoundTimer(variants, min_sample_s=0.05)
    timer.run(rounds)
    base = timer.samples[BASELINE]
    return {key: Interval.of_ratios(base, timer.samples[key], 0.95) for key in keys}


def candidates(db: Path, recipe: str, params: list[str]) -> dict[str, dict[str, Any]]:
    """Every recorded candidate of the case (key → its parameters), failed ones too."""
    name = load(recipe).name
    fixed = dict(parse_override(p) for p in params)
    return {
        row.key: dict(row.params)
        for row in ResultsDB(db, read_only=True).results()
        if row.recipe == name and all(row.params.get(k) == v for k, v in fixed.items())
    }


def replay(
    recipe: str,
    params: list[str],
    known: dict[str, dict[str, Any]],
    ref: dict[str, Interval],
    seeds: int,
) -> Any:
    """Each strategy at budgets of 10%, 15% and 25% of the grid, every candidate it
    proposes (of ``known``, key → parameters) scored by its reference speedup (failed
    ones by nothing): the best it saw as a fraction of the reference best, per seed; how
    often it saw a candidate within 1% of the best, and the best itself. ``adaptive``
    uses the additive cost model, ``adaptive_learned`` the learned one (what
    ``--strategy adaptive`` uses when scikit-learn is installed)."""
    r = load(recipe)
    fixed = dict(parse_override(p) for p in params)
    names = [a.name for a in r.space.axes if a.name not in fixed]
    measured: dict[Point, float | None] = {
        tuple(values.get(n) for n in names): ref[key].median if key in ref else None
        for key, values in known.items()
    }
    points = list(measured)
    best = max(v for v in measured.values() if v is not None)
    features = Featurizer(names, {**r.parameter_dict, **fixed})
    axes = [
        sorted({p[i] for p in points}, key=lambda v: (isinstance(v, str), v))
        for i in range(len(names))
    ]
    out: dict[str, Any] = {
        "grid_evaluations": len(points),
        "reference_best": best,
        "within_5pct_of_best": sum(v is not None and v >= HIT * best for v in measured.values()),
        "within_1pct_of_best": sum(v is not None and v >= 0.99 * best for v in measured.values()),
    }
    for fraction in REPLAY_BUDGETS:
        budget = max(1, round(fraction * len(points)))
        makers: dict[str, Callable[[int, int], Strategy]] = {
            "random": lambda seed, n: RandomSample(points, n, seed),
            "adaptive": lambda seed, n: Evolutionary(points, axes, n, seed, batch=4),
            "adaptive_learned": lambda seed, n: Evolutionary(
                points, axes, n, seed, batch=4, model=LearnedModel(features)
            ),
            "model": lambda seed, n: ModelGuided(points, features, n, seed, batch=4),
        }
        found: dict[str, Any] = {}
        for name, make in makers.items():
            shares = []
            for seed in range(seeds):
                strategy, history = make(seed, budget), {}
                while batch := strategy.propose(history):
                    history.update({point: measured[point] for point in batch})
                shares.append(max((v for v in history.values() if v), default=0.0) / best)
            found[name] = {
                "of_best_per_seed": [round(x, 4) for x in shares],
                "median_of_best": round(statistics.median(shares), 4),
                "worst_of_best": round(min(shares), 4),
                "within_1pct": f"{sum(x >= 0.99 for x in shares)}/{seeds}",
                "found_the_best": f"{sum(x >= 1.0 for x in shares)}/{seeds}",
            }
        out[f"budget_{round(fraction * 100)}pct"] = {"evaluations": budget, **found}
    return out


def run_case(name: str, spec: list[str], work: Path, args: argparse.Namespace) -> dict[str, Any]:
    recipe, params = spec[0], spec[1:]
    seeds, rounds, threads = args.seeds, args.reference_rounds, args.threads
    db = work / f"{name}.db"
    start = time.perf_counter()
    grid = sweep(db, recipe, params, threads)
    result: dict[str, Any] = {
        "recipe": recipe,
        "params": params,
        "threads": threads,
        "space": grid["space"],
        "grid": {
            "wall_s": time.perf_counter() - start,
            "ranked": len(grid["ranked"]),
            "failed": len(grid["failed"]),
        },
        "decisions": {},
    }
    for policy in args.policy or list(POLICIES) if args.decisions else ():
        options = POLICIES[policy]
        runs = []
        for seed in range(seeds):
            report = sweep(db, recipe, params, threads, "--rebench", "--seed", str(seed), *options)
            decision = report["decision"]
            runs.append(
                {
                    "seed": seed,
                    "best": report["best"]["key"],
                    "best_params": report["best"]["params"],
                    "claimed_speedup": report["best"]["race"]["speedup"],
                    "verdict": decision["verdict"],
                    "race_rounds": decision["rounds"],
                    "timing_s": decision["screening_s"] + decision["seconds"],
                }
            )
        result["decisions"][policy] = runs
    keys = [r["key"] for r in grid["ranked"]]
    result["candidates"] = candidates(db, recipe, params)
    ref = reference(db, recipe, params, keys, rounds, threads)
    best = max(i.median for i in ref.values())
    result["reference"] = {
        "rounds": rounds,
        "best": max(ref, key=lambda k: ref[k].median),
        "grid_screening_best": grid["ranked"][0]["key"] if grid["ranked"] else None,
        "speedups": {k: i.as_list() for k, i in ref.items()},
    }
    for policy, runs in result["decisions"].items():
        for run in runs:
            run["of_reference_best"] = round(ref[run["best"]].median / best, 4)
            run["hit"] = ref[run["best"]].median >= HIT * best
        result[f"{policy}_hits"] = f"{sum(r['hit'] for r in runs)}/{len(runs)}"
        result[f"{policy}_median_timing_s"] = statistics.median(r["timing_s"] for r in runs)
    result["replay"] = replay(recipe, params, result["candidates"], ref, args.replay_seeds)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the databases")
    parser.add_argument("--seeds", type=int, default=5, help="decision runs per policy (5)")
    parser.add_argument("--replay-seeds", type=int, default=20, help="replays per strategy")
    parser.add_argument("--no-decisions", dest="decisions", action="store_false")
    parser.add_argument("--policy", choices=sorted(POLICIES), action="append", help="repeatable")
    parser.add_argument("--replay-from", type=Path, help="a saved result: replays only")
    parser.add_argument("--reference-rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="x86 runtime threads (1)")
    parser.add_argument("--case", choices=sorted(CASES), action="append", help="repeatable")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.replay_from:
        results = json.loads(args.replay_from.read_text())
        for name, case in results.items():
            ref = {k: Interval.from_list(v) for k, v in case["reference"]["speedups"].items()}
            if "candidates" not in case:  # saved before results kept them: the database
                case["candidates"] = candidates(
                    args.work / f"{name}.db", case["recipe"], case["params"]
                )
            case["replay"] = replay(
                case["recipe"], case["params"], case["candidates"], ref, args.replay_seeds
            )
    else:
        results = {
            name: run_case(name, CASES[name], args.work, args)
            for name in args.case or DEFAULT_CASES
        }
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
