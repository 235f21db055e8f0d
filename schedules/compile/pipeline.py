"""The one-way flow: recipe → transform scripts → IREE compile → run + check → report.

:func:`plan` resolves a recipe for one target and emits its scripts; :func:`build` writes
the files iree-compile reads; :func:`compile_plan` compiles them and proves every schedule
step applied. Checking and timing build on this in :mod:`.evaluation`.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tdsched.recipes.workloads import generate
from tdsched.recipes.workloads.lowered import FILE_FORMATS, ROUTES, file_workload, model_workload
from tdsched.targets import Target
from tdsched.targets.compiler import (
    CompileError,
    CompileRequest,
    CompileResult,
    compile_command,
    probe_compile,
    run_compile,
)
from tdsched.targets.target import TARGET_NAMES
from tdsched.targets.workload import Workload, WorkloadError, check_memory, load_mlir_file
from tdsched.transform_lib.census import (
    CENSUS_FLAGS,
    StructuredOp,
    census_library,
    locate_layers,
    read_census,
)
from tdsched.transform_lib.dispatch_region import form_dispatch_region
from tdsched.transform_lib.errors import ScheduleError
from tdsched.transform_lib.fuse_ext import fuse_ext
from tdsched.transform_lib.fuse_ext.plan import describe_fusion
from tdsched.transform_lib.fuse_ext.probe import KernelPlan, plan_kernels
from tdsched.transform_lib.graph.report import rewrite_text
from tdsched.transform_lib.interpreter import ScriptFailed, apply_script
from tdsched.transform_lib.payload import describe_change, loop_counts, op_histogram
from tdsched.transform_lib.remarks import (
    empty_remarks,
    found_remarks,
    kernel_after_schedule,
    printed_sections,
    snapshot_sections,
)

from ..base.errors import RecipeError, ScheduleNotApplied, Where
from ..dsl.layers import expand_layers, kernels_by_layer, resolve_kernel_layers, workload_layers
from ..dsl.params import resolve
from ..dsl.recipe import METRICS, Recipe
from ..dsl.space import ParamValue
from .build_target import BuildTarget
from .emit import GRAPH_ENTRY, DispatchRegionStage, Marker, Scripts, ScriptStage, emit
from .graph_rewrites import RewriteStage


@dataclass(frozen=True)
class Plan:
    """A resolved recipe for one target, its workload and its scripts."""

    recipe: Recipe
    target: Target
    workload: Workload
    scripts: Scripts
    loop_counts: dict[str, set[int]]
    print_after_schedule: bool = False
    notes: tuple[str, ...] = ()
    """What planning resolved (kernel matches by layer), reported with the build."""
    trace_steps: bool = False
    """Its scripts print the payload before and after every step (see :mod:`.step_trace`)."""


@dataclass(frozen=True)
class BuildFiles:
    """Files written for iree-compile: the input module and the kernel library."""

    input_file: Path
    graph_script: Path | None
    kernel_library: Path | None
    kernel_markers: tuple[Marker, ...] = ()
    """What the kernel library's steps must print (see :func:`compile_plan`)."""
    reports: tuple[str, ...] = ()


def plan(
    recipe: Recipe,
    target: BuildTarget | str | None = None,
    overrides: Mapping[str, ParamValue] | None = None,
    *,
    input_file: Path | None = None,
    print_after_schedule: bool = False,
    trace_steps: bool = False,
) -> Plan:
    """Resolve ``recipe`` for ``target`` and emit its scripts.

    ``target``: the build (:class:`.measure.build_target.BuildTarget`: the machine to
    build for, and the CPU threads it will run on, which select among a shape table's
    entries), or a target's name for a build with the default settings; None or a build
    whose target is None: the recipe's first target.

    ``input_file`` replaces the recipe's workload with a ``.mlir`` module (the reference
    is then IREE's default build of that module). ``print_after_schedule`` and
    ``trace_steps``: what the scripts print besides their markers (see :func:`.emit.emit`).
    """
    build = target if isinstance(target, BuildTarget) else BuildTarget(target)
    named = build.target or recipe.targets[0]
    if named in TARGET_NAMES:
        build = build.resolved(named)
    on_cpu = build.cpu_threads if named in TARGET_NAMES else None
    built_for = build.machine if named in TARGET_NAMES else None
    resolved = resolve(recipe, overrides, on_cpu, named, built_for)
    for flag in (*resolved.compile_flags, *resolved.baseline.flags):
        if not flag.startswith("--"):
            raise RecipeError(
                Where(resolved.source, None, "compile_flags / baseline.flags"),
                f"expected an iree-compile flag starting with '--', got {flag!r}",
            )
    for metric in resolved.metrics:
        if metric not in METRICS:
            raise RecipeError(
                Where(resolved.source, None, "metrics"),
                f"unknown metric {metric!r}; available: {', '.join(METRICS)}",
            )
    chosen = build.target or resolved.targets[0]
    if chosen not in resolved.targets:
        raise RecipeError(
            Where(resolved.source, None, "targets"),
            f"this recipe is written for {', '.join(resolved.targets)}, not {chosen}; "
            "its kernel schedules are target-specific",
        )
    for kernel in resolved.kernels:
        unknown = sorted(set(kernel.targets or ()) - set(resolved.targets))
        if unknown:
            raise RecipeError(
                kernel.where.child("targets"),
                f"{', '.join(unknown)} is not among the recipe's targets "
                f"({', '.join(resolved.targets)}); this kernel schedule would never apply",
            )
    resolved = dataclasses.replace(
        resolved,
        kernels=tuple(k for k in resolved.kernels if k.targets is None or chosen in k.targets),
    )
    workload = load_mlir_file(input_file) if input_file else build_workload(resolved)
    check_memory(workload)
    resolved = expand_layers(resolved, workload_layers(workload.mlir))
    counts = loop_counts(workload.mlir)
    chosen_target = dataclasses.replace(build, target=chosen).compile_target
    notes: list[str] = []
    if kernels_by_layer(resolved):
        resolved, notes = _resolve_kernel_layers(resolved, chosen_target, workload, counts)
    scripts = emit(
        resolved,
        chosen_target,
        counts,
        print_after_schedule=print_after_schedule,
        trace_steps=trace_steps,
    )
    resolved, required = _add_required_flags(resolved, scripts)
    notes.extend(required)
    return Plan(
        resolved,
        chosen_target,
        workload,
        scripts,
        counts,
        print_after_schedule,
        tuple(notes),
        trace_steps,
    )


def _add_required_flags(recipe: Recipe, scripts: Scripts) -> tuple[Recipe, list[str]]:
    """``recipe`` with the compile flags its graph rewrites need
    (:attr:`RewriteStage.compile_flags`) added to its own, and a note per flag added."""
    flags, notes = list(recipe.compile_flags), []
    for stage in scripts.graph:
        if isinstance(stage, RewriteStage):
            for flag in stage.compile_flags:
                if flag not in flags:
                    flags.append(flag)
                    notes.append(f"{stage.primitive}: compiled with {flag} ({stage.why})")
    return dataclasses.replace(recipe, compile_flags=tuple(flags)), notes


def _resolve_kernel_layers(
    recipe: Recipe, target: Target, workload: Workload, counts: dict[str, set[int]]
) -> tuple[Recipe, list[str]]:
    """Kernel matches by layer, rewritten to what the census of the graph-scheduled module
    shows those layers became (see :mod:`tdsched.schedules.dsl.layers`)."""
    graph_only = dataclasses.replace(recipe, kernels=())
    scripts = emit(graph_only, target, counts)
    module = apply_graph(Plan(graph_only, target, workload, scripts, counts)).module
    census = dispatch_census(module, target, recipe.compile_flags)
    return resolve_kernel_layers(recipe, workload.mlir, census)


@functools.lru_cache(maxsize=8)
def dispatch_census(
    module: str, target: Target, flags: tuple[str, ...] = ()
) -> tuple[StructuredOp, ...]:
    """The structured ops of each dispatch IREE forms from ``module``, as kernel configs
    see them (one compile that stops after kernel configuration; remembered per input)."""
    return tuple(read_census(census_output(module, target, flags)))


def census_output(module: str, target: Target, flags: tuple[str, ...] = ()) -> str:
    """What a census compile of ``module`` prints: every dispatch function holding a
    structured op, as kernel configs see it (:func:`census_functions` reads them)."""
    with tempfile.TemporaryDirectory(prefix="tdsched-census-") as tmp:
        source, library = Path(tmp) / "input.mlir", Path(tmp) / "census.mlir"
        source.write_text(locate_layers(module))
        library.write_text(census_library())
        request = CompileRequest(
            source, target, Path(tmp) / "census.vmfb", library, (*flags, *CENSUS_FLAGS)
        )
        return probe_compile(request)


def build_workload(recipe: Recipe) -> Workload:
    """The workload a resolved recipe names."""
    spec = recipe.workload
    try:
        if spec.file is not None:
            fmt = _choice(spec.format, FILE_FORMATS, "format")
            return file_workload(Path(spec.file), spec.function, fmt)
        if spec.model is not None:
            base = Path(spec.base) if spec.base else None
            via = _choice(spec.via, ROUTES, "via")
            return model_workload(spec.model, dict(spec.args), via, base)
        assert spec.generator is not None
        return generate(spec.generator, dict(spec.args))
    except ValueError as exc:
        raise RecipeError(
            spec.where.child("workload") if not spec.where.field else spec.where, str(exc)
        ) from exc


def _choice(value: str, allowed: tuple[str, ...], name: str) -> Any:
    """``value`` if it is one of ``allowed`` (a Literal of them), else a WorkloadError."""
    if value not in allowed:
        raise WorkloadError(f"{name}: got {value!r}; use one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class GraphResult:
    """The module after the graph schedule, what each fuse_ext step reported, and every
    transform script that ran (fuse_ext's are planned on the payload, so known only now)."""

    module: str
    reports: tuple[str, ...]
    scripts: tuple[str, ...]


def apply_graph(p: Plan, snapshots: list[tuple[int, str]] | None = None) -> GraphResult:
    """Run the graph schedule's stages in order on the workload.

    ``snapshots`` (with ``p.trace_steps``) receives ``(step, module)`` after each step as
    it runs (1-based), so what ran before a failure is kept.
    """
    module = p.workload.mlir
    reports: list[str] = []
    scripts: list[str] = []
    step = 0
    for stage in p.scripts.graph:
        try:
            if isinstance(stage, ScriptStage):
                before = op_histogram(module)
                try:
                    module, printed = apply_script(module, stage.script, GRAPH_ENTRY)
                except ScriptFailed as exc:
                    _take_snapshots(exc.printed, snapshots)
                    _require(stage.markers, exc.printed, str(exc))
                    raise
                _take_snapshots(printed, snapshots)
                _require(stage.markers, printed)
                scripts.append(stage.script)
                change = describe_change(before, op_histogram(module))
                reports.append(f"{stage.label}: {change}")
            elif isinstance(stage, RewriteStage):
                module, rewrite = rewrite_text(module, stage.rewrite)
                reports.append("\n".join(rewrite.lines()))
                scripts.extend(
                    rewrite.scripts
                    or [f"// {stage.primitive}: a Python rewrite over the MLIR bindings"]
                )
            elif isinstance(stage, DispatchRegionStage):
                module, region = form_dispatch_region(module, stage.root, stage.stop)
                reports.append("\n".join(region.lines()))
            else:
                module, report = fuse_ext(module, stage.options)
                reports.append("\n".join(report.lines()))
                scripts.extend(report.scripts)
        except ScheduleError as exc:
            where = stage.where if not isinstance(stage, ScriptStage) else None
            raise RecipeError(where or Where(p.recipe.source, None, "graph"), str(exc)) from exc
        step += stage.steps if isinstance(stage, ScriptStage) else 1
        if snapshots is not None and not isinstance(stage, ScriptStage):
            snapshots.append((step, module))
    return GraphResult(module, tuple(reports), tuple(scripts))


def _take_snapshots(printed: str, snapshots: list[tuple[int, str]] | None) -> None:
    """Add the graph script's per-step modules (printed with ``trace_steps``)."""
    if snapshots is not None:
        snapshots.extend((s, ir) for scope, s, ir in snapshot_sections(printed) if scope == "graph")


def refuse_host_loops(p: Plan) -> None:
    """Raise when the graph schedule leaves host-level loops, which IREE cannot compile."""
    stage = p.scripts.has_host_loops
    if stage is not None:
        raise RecipeError(
            stage.where,
            f"{stage.options.primitive} in a graph schedule leaves host-level loops, which "
            "IREE cannot compile; inspect it with 'tdsched apply' and check its numerics with "
            "'tdsched run' (numpy evaluation), or schedule the kernel instead",
        )


def _require(expected: tuple[Marker, ...], printed: str, failure: str | None = None) -> None:
    """Raise at the first step whose handle held no op where the step ran, from what a
    script ``printed``: never (the step applied nowhere), or in some of the places it ran
    (e.g. one of two dispatches a kernel schedule applies to).

    ``failure``: the script failed with this error after printing ``printed``. Steps it
    never reached printed nothing and are not judged; an empty handle before the failure
    is named as its cause. Returns when no step is to blame (the caller raises the error).
    """
    found, empty = found_remarks(printed), empty_remarks(printed)
    for marker in expected:
        ran = found.get(marker.text, 0) + empty.get(marker.text, 0)
        if failure is not None and ran == 0:
            continue
        if marker.text not in empty and ran > 0:
            continue
        where = (
            f" (so in {empty[marker.text]} of the {ran} dispatches its kernel schedule ran "
            "on: narrow the kernel's match, e.g. by shape, or give those dispatches a kernel "
            "schedule of their own)"
            if marker.text in found
            else ""
        )
        cause = f"; it then failed: {_first_error(failure)}" if failure else ""
        raise ScheduleNotApplied(marker.where, f"{marker.missing}{where}{cause}")


def _first_error(failure: str) -> str:
    """The first ``error:`` line of a failure's text (MLIR diagnostics), or its first line."""
    lines = [line.strip() for line in failure.splitlines() if line.strip()]
    return next((line for line in lines if "error:" in line), lines[0] if lines else failure)


def build(
    p: Plan,
    out_dir: Path,
    stem: str | None = None,
    scratch: Path | None = None,
    snapshots: list[tuple[int, str]] | None = None,
) -> BuildFiles:
    """Apply the graph schedule and write the input module and scripts under ``out_dir``.

    Files are ``STEM.input.mlir``, ``STEM.graph.mlir`` and ``STEM.kernels.mlir``; ``stem``
    defaults to ``<recipe>.<target>``. What planning writes on the way (kernel-level
    fuse_ext's probe compiles) goes to ``scratch``, default ``out_dir``. ``snapshots``:
    see :func:`apply_graph`.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or f"{p.recipe.name}.{p.target.name}"
    input_file = out_dir / f"{stem}.input.mlir"
    graph_result = apply_graph(p, snapshots)
    input_file.write_text(graph_result.module)
    graph = library = None
    if graph_result.scripts:
        graph = out_dir / f"{stem}.graph.mlir"
        graph.write_text("\n// -----\n".join(graph_result.scripts))
    reports = [*p.notes, *graph_result.reports]
    scripts = p.scripts
    if scripts.kernel_fusions:
        scripts = _plan_kernel_fusions(p, input_file, scratch or out_dir, reports)
    if scripts.kernel_library is not None:
        library = out_dir / f"{stem}.kernels.mlir"
        library.write_text(scripts.kernel_library)
    return BuildFiles(input_file, graph, library, scripts.kernel_markers, tuple(reports))


def _plan_kernel_fusions(p: Plan, input_file: Path, out_dir: Path, reports: list[str]) -> Scripts:
    """Plan kernel-level fuse_ext on the dispatches as their strategies see them.

    A probe strategy prints its dispatch and then stops iree-compile (left unscheduled,
    some dispatches take IREE minutes to reject), so each compile reveals one kernel:
    probe, plan it, emit it for real, and probe again until no kernel is left to plan
    (a kernel that matched no dispatch never prints; the final compile reports it).
    """
    refuse_host_loops(p)
    plans: dict[str, KernelPlan] = {}
    scripts = p.scripts
    for attempt in range(len(p.scripts.kernel_fusions)):
        pending = [r for r in p.scripts.kernel_fusions if r.kernel not in plans]
        assert scripts.kernel_library is not None
        library = out_dir / f"probe{attempt}.kernels.mlir"
        library.write_text(scripts.kernel_library)
        request = CompileRequest(
            input_file, p.target, out_dir / "probe.vmfb", library, p.recipe.compile_flags
        )
        try:
            found = plan_kernels(probe_compile(request), pending)
        except ScheduleError as exc:
            raise RecipeError(_kernel_where(p, pending[0].kernel), str(exc)) from exc
        if not found:
            break
        plans.update(found)
        for name, kernel_plan in found.items():
            fusion = kernel_plan.plan
            lines = describe_fusion(fusion, fusion.producers, fusion.outside)
            reports.append(f"kernel '{name}': " + "\n".join(lines))
        scripts = emit(
            p.recipe,
            p.target,
            p.loop_counts,
            print_after_schedule=p.print_after_schedule,
            trace_steps=p.trace_steps,
            fusion_plans=plans,
        )
    for fusion_request in p.scripts.kernel_fusions:
        if fusion_request.kernel not in plans:
            raise ScheduleNotApplied(
                _kernel_where(p, fusion_request.kernel),
                "this kernel schedule matched no dispatch, so its fuse_ext step could not be "
                "planned. Check 'match' (op name, kind, shape, dtype, inputs, used_by, body) "
                "against the dispatch root ops ('tdsched apply' on a recipe without it shows the "
                "dispatches)",
            )
    return scripts


def _kernel_where(p: Plan, kernel: str) -> Where:
    return next(k.where for k in p.recipe.kernels if k.name == kernel)


def compile_plan(p: Plan, files: BuildFiles, output: Path) -> CompileResult:
    """Compile the scheduled module and require every kernel schedule step to have applied."""
    refuse_host_loops(p)
    return _compile_scheduled(p, files, output)


def _compile_scheduled(p: Plan, files: BuildFiles, output: Path) -> CompileResult:
    """Compile with the kernel library; a step whose handle came out empty is named
    (also when that made the compile fail, e.g. 'requires exactly one ... (got 0)')."""
    result, _, failure = _compile_checked(p, files, output)
    if failure is not None:
        raise failure
    assert result is not None
    return result


def compile_printed(p: Plan, files: BuildFiles) -> tuple[str, RecipeError | CompileError | None]:
    """Compile like :func:`compile_plan` and return what the kernel schedules printed,
    with what went wrong (the step at fault, or the compile error) instead of raising:
    what a schedule printed before its failing step is what explains it."""
    _, printed, failure = _compile_checked(p, files, files.input_file.with_suffix(".vmfb"))
    return printed, failure


def _compile_checked(
    p: Plan, files: BuildFiles, output: Path
) -> tuple[CompileResult | None, str, RecipeError | CompileError | None]:
    """The compile's result (None when it failed), what it printed, and the failure:
    the step whose handle came out empty, or else the compile error."""
    try:
        result = run_compile(_scheduled_request(p, files, output))
    except CompileError as exc:
        try:
            _require(files.kernel_markers, exc.stdout, str(exc))
        except ScheduleNotApplied as blame:
            return None, exc.stdout, blame
        return None, exc.stdout, exc
    try:
        _require(files.kernel_markers, result.stdout)
    except ScheduleNotApplied as blame:
        return result, result.stdout, blame
    return result, result.stdout, None


def _scheduled_request(p: Plan, files: BuildFiles, output: Path) -> CompileRequest:
    """The compile of the scheduled module: its kernel library and the recipe's flags."""
    return CompileRequest(
        files.input_file, p.target, output, files.kernel_library, p.recipe.compile_flags
    )


def scheduled_command(p: Plan, files: BuildFiles, output: Path) -> list[str]:
    """The iree-compile command line :func:`compile_plan` runs for ``files``."""
    return compile_command(_scheduled_request(p, files, output))


def compile_baseline(p: Plan, out_dir: Path) -> CompileResult:
    """IREE's default build of the untransformed workload (same target flags), with the
    recipe's baseline flags (e.g. ``--iree-opt-data-tiling``)."""
    return compile_unscheduled(p, out_dir, "baseline", p.recipe.baseline.flags)


def compile_unscheduled(
    p: Plan, out_dir: Path, label: str, flags: tuple[str, ...]
) -> CompileResult:
    """IREE's own build of the untransformed workload with extra iree-compile ``flags``,
    to ``out_dir/<workload>.<target>.<label>.vmfb`` (the baseline, a peer)."""
    source = out_dir / f"{p.workload.name}.{label}.mlir"
    source.write_text(p.workload.mlir)
    output = out_dir / f"{p.workload.name}.{p.target.name}.{label}.vmfb"
    return run_compile(CompileRequest(source, p.target, output, None, flags))


def compile_default_workload(workload: Workload, target: Target, out_dir: Path) -> Path:
    """IREE's default build of an auxiliary workload (the bandwidth probe, the
    regression calibration kernel)."""
    source = out_dir / f"{workload.name}.mlir"
    source.write_text(workload.mlir)
    output = out_dir / f"{workload.name}.{target.name}.vmfb"
    return Path(run_compile(CompileRequest(source, target, output)).output)


def kernels_after_schedule(p: Plan, files: BuildFiles) -> dict[str, str]:
    """Each strategy kernel's dispatch IR right after the user's steps (before the tail).

    ``p`` must have been planned with ``print_after_schedule=True`` and built to ``files``.
    """
    refuse_host_loops(p)
    output = files.input_file.with_suffix(".apply.vmfb")
    result = _compile_scheduled(p, files, output)
    sections = dict(printed_sections(result.stdout))
    titles = {k.name: kernel_after_schedule(k.name) for k in p.recipe.kernels}
    return {name: sections[title] for name, title in titles.items() if title in sections}
