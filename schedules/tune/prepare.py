"""A task made ready to tune: its standalone workload and its template recipe under
``OUT/tasks/`` (a recipe already there is kept), each kernel matching its op alone in the
model, or the reason the task keeps IREE's pipeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tdsched.transform_lib.constant_operands import ModelConstants
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch

from ..base.files import write_atomically
from ..compile.build_target import BuildTarget
from ..frontends.yaml_writer import recipe_yaml
from .progress import percent
from .seeds import seeded
from .task_match import Ambiguous, ModelOps, op_match
from .task_workloads import TaskSkipped, standalone_task
from .tasks import Task
from .templates import PACKABLE, NoTemplate, Template, template_for
from .templates_rows import is_row_reduction, row_reduction_template
from .templates_vulkan import vulkan_template
from .tolerance import TOLERANCE
from .tuning import TaskTuning, TuneOptions


def prepare(
    task: Task,
    model: ModelOps,
    sources: Mapping[str, str],
    weights: ModelConstants,
    folder: Path,
    o: TuneOptions,
) -> TaskTuning:
    """The task's workload and template recipe, or the reason it is not tuned. A task
    that may run packed (its root is a matmul) keeps the model's constant weights as
    constants (``weights``: the model's), so a pack of them leaves the timed call as it
    does in the model. A task that has a template from an earlier run into ``folder``
    is tuned whatever its share now: the profile is noisy, and a task near
    ``--min-share`` must not drop out of the model recipe on a re-run. Each kernel of
    the template matches its op alone in the model (:mod:`.task_match`). Where the main
    kernel's (IREE's root's) cannot, the task keeps IREE's pipeline (checked before
    compiling); a further kernel whose op cannot is left out, with the parameters only
    it used."""
    tuning = TaskTuning(task)
    recipe = folder / f"{task.name}.yaml"
    small = task.share is not None and task.share < o.min_share
    try:
        if small and not recipe.exists():
            tuning.reason = f"{percent(task.share)} of the call, below --min-share"
            return tuning
        _match_at(task, task.iree_root_position, model, by_kind=o.build.compile_target.is_gpu)
        if not recipe.exists():
            folder.mkdir(parents=True, exist_ok=True)
            constants = (
                weights.inputs(task.root.op, task.layers)
                if task.root.op in PACKABLE
                else frozenset()
            )
            made = standalone_task(
                task,
                [sources[d] for d in task.dispatches],
                folder / f"{task.name}.mlir",
                o.build.compile_target,
                constants,
            )
            template = _template(task, made.configured, o.build, model, constants)
            by_kind = template.match_by_kind
            matches = [_match_at(task, made.configured.root, model, by_kind)]
            kept = []
            for kernel in template.more_kernels:
                try:
                    matches.append(op_match(task, kernel.position, model, by_kind))
                    kept.append(kernel)
                except Ambiguous:
                    continue  # that op keeps the tile sizes IREE derives from the root's
            template = template.keeping(kept)
            write_atomically(recipe, _task_recipe(task, template, matches, o).encode())
    except (TaskSkipped, NoTemplate) as exc:
        tuning.reason = str(exc)
        return tuning
    tuning.recipe = recipe
    return tuning


def _template(
    task: Task,
    dispatch: ConfiguredDispatch,
    build: BuildTarget,
    model: ModelOps,
    constants: frozenset[int],
) -> Template:
    """The task's template for ``build``: Vulkan's config, or on x86 the row-reduction
    config where it fits, else the kernel schedule (:mod:`.templates`), a matmul's
    starting from the shipped kernel for its shape (:mod:`.seeds`; ``constants``: the
    root's inputs that are the model's constants)."""
    if build.compile_target.is_gpu:
        return vulkan_template(task, dispatch)
    if is_row_reduction(dispatch):
        return row_reduction_template(dispatch)
    template = template_for(task, dispatch, model.count(task.root.op) == 1)
    return seeded(template, dispatch, build, constants)


def _match_at(task: Task, position: int, model: ModelOps, by_kind: bool) -> dict[str, Any]:
    """The kernel match of ``task``'s op at ``position`` (``by_kind``: by its kind rather
    than its name); raises :class:`TaskSkipped` where none selects it alone."""
    try:
        return op_match(task, position, model, by_kind)
    except Ambiguous as exc:
        matched = "kind" if by_kind else "op"
        op = task.ops[position]
        raise TaskSkipped(
            f"the {matched} and loop bounds of its {op.describe()} also occur in task "
            f"{exc.other}, and neither its input count, the op using its result nor its body "
            "tells them apart: a kernel match would take both"
        ) from exc


def _task_recipe(
    task: Task, template: Template, matches: Sequence[Mapping[str, Any]], o: TuneOptions
) -> str:
    """The task's template recipe: ``matches`` holds the match of the template's main
    kernel (IREE's root), then one per kernel of ``template.more_kernels``."""
    root = task.root
    main = {
        "name": task.name,
        "match": dict(matches[0]),
        **({"when": template.kernel_when} if template.kernel_when else {}),
        **template.kernel_body(),
    }
    more = [
        {"name": f"{task.name}_{kernel.suffix}", "match": dict(match), "config": kernel.config}
        for kernel, match in zip(template.more_kernels, matches[1:], strict=True)
    ]
    document = {
        "name": f"task_{task.name}",
        "description": f"{task.kind} {root.describe()}: {', '.join(task.layers) or 'no layers'}",
        "workload": {"file": f"{task.name}.mlir"},
        "targets": [o.build.name],
        "parameters": template.parameters,
        "space": template.space,
        "constraints": template.constraints,
        "tolerance": TOLERANCE,
        **({"compile_flags": template.compile_flags} if template.compile_flags else {}),
        **({"graph": template.graph_document()} if template.graph else {}),
        "kernels": [main, *more],
    }
    header = (
        f"# Written by tdsched tune: task {task.name} ({', '.join(task.epilogue) or 'no epilogue'}"
        " after its root). Edit it and tune again: an existing file is kept.\n"
    )
    return header + recipe_yaml(document)
