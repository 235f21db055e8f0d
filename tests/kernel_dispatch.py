"""Helpers of the kernel-match and tune tests: which kernel each dispatch of a recipe's
build got (and that the build runs correct), and each task's prepared template in a
model."""

from __future__ import annotations

from pathlib import Path

from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.compile.pipeline import apply_graph, census_output, plan
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.measure.run_report import RunReport, run
from tdsched.schedules.tune.prepare import prepare
from tdsched.schedules.tune.task_match import ModelOps
from tdsched.schedules.tune.tasks import extract_tasks
from tdsched.schedules.tune.tuning import TaskTuning, TuneOptions
from tdsched.targets import make_target
from tdsched.targets.compiler import CompileRequest, run_compile
from tdsched.targets.workload import Workload
from tdsched.transform_lib.census import census_functions, read_census
from tdsched.transform_lib.constant_operands import ModelConstants
from tdsched.transform_lib.dispatch_work import CONFIGURED_FLAGS, read_dispatch_work


def kernels_per_dispatch(recipe: Path, target: str, tmp_path: Path) -> list[str | None]:
    """The kernel each dispatch of ``recipe``'s build for ``target`` got, in dispatch
    order (``None``: IREE's own configuration), compiling up to kernel configuration."""
    planned = plan(load(str(recipe)), target)
    library, source = tmp_path / "library.mlir", tmp_path / "input.mlir"
    library.write_text(planned.scripts.kernel_library or "")
    source.write_text(apply_graph(planned).module)
    out = tmp_path / "configured.mlir"
    run_compile(CompileRequest(source, make_target(target), out, library, CONFIGURED_FLAGS))
    return [d.kernel for d in read_dispatch_work(out.read_text())]


def assert_selects(
    recipe: Path, target: str, tmp_path: Path, expected: list[str | None], atol: float
) -> RunReport:
    """``recipe``'s build for ``target`` gives the dispatches the kernels ``expected``
    (:func:`kernels_per_dispatch`), and runs correct within ``atol``; its run's report."""
    assert kernels_per_dispatch(recipe, target, tmp_path) == expected
    report = run(plan(load(str(recipe)), target), time_it=False)
    assert report.status == "ok", report
    assert report.max_abs_error is not None and report.max_abs_error < atol
    return report


def prepared_tasks(workload: Workload, folder: Path) -> list[TaskTuning]:
    """Each task of ``workload`` on x86 (1 thread, untimed) as ``tdsched tune`` prepares
    it: its template written into ``folder``, or the reason it has none."""
    target = make_target("x86")
    census = census_output(workload.mlir, target)
    tasks = extract_tasks(workload, target, 1, census=census, time_it=False)
    model = ModelOps.of(read_census(census), tasks.tasks)
    options = TuneOptions(BuildTarget("x86", threads=1), budget_s=60)
    sources, weights = census_functions(census), ModelConstants(workload.mlir)
    return [prepare(task, model, sources, weights, folder, options) for task in tasks.tasks]
