"""A model's task as a workload of its own, the unit ``tdsched tune`` sweeps.

A task's first dispatch function, as the census printed it, becomes a ``.mlir`` file
with one public function on tensors (``transform_lib.standalone_dispatch``); the root's
inputs that are weights in the model may be made constants in it, as they are there. It is kept
only when IREE forms the same dispatch from it again: a census of the file must show
the task's ops, names, loop bounds and element types, in order (a kernel schedule tuned
on anything else would not be the one the model's dispatch gets). IREE's own
configuration of that dispatch (``transform_lib.dispatch_config``) comes with it: the
loops as strategies see them and IREE's tile sizes, which the templates start from. A
softmax's dispatch, which IREE formed from a ``linalg.softmax`` before decomposing it, is
written as that ``linalg.softmax`` (``standalone_dispatch.as_softmax``): from its three
decomposed ops IREE would form two dispatches.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tdsched.targets import Target
from tdsched.targets.compiler import CompileError, CompileRequest, run_compile
from tdsched.transform_lib.constant_operands import with_constant_operands
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, read_configured
from tdsched.transform_lib.errors import ScheduleError
from tdsched.transform_lib.standalone_dispatch import as_softmax, dataflow, standalone_function

from ..base.files import write_atomically
from ..compile.pipeline import dispatch_census
from .tasks import Task, group_tasks

CONFIGURE_FLAGS = ("--compile-to=executable-configurations",)


class TaskSkipped(Exception):
    """A task that cannot be tuned on its own; the message says why."""


@dataclass(frozen=True)
class TaskWorkload:
    """A task written as a standalone workload."""

    path: Path
    function: str
    configured: ConfiguredDispatch
    """The dispatch IREE forms from it, as strategies see it, with IREE's tile sizes."""


def standalone_task(
    task: Task,
    sources: Sequence[str],
    path: Path,
    target: Target,
    constants: frozenset[int] = frozenset(),
) -> TaskWorkload:
    """Write ``task`` (whose dispatch functions the census printed as ``sources``) to
    ``path`` as a function named after the task, and check that IREE forms the same
    dispatch from it. Raises :class:`TaskSkipped` with the reason when it cannot, or
    when its dispatches' dataflow differs (a kernel schedule is planned on one; the
    first is the one timed, the others may differ only in what their elementwise ops
    read and compute, e.g. a residual added in the epilogue). ``constants``: the root
    op's inputs that are constants in the model (weights), defined as constants in the
    function too (``transform_lib.constant_operands``)."""
    try:
        texts = [standalone_function(source, task.name) for source in sources]
    except ScheduleError as exc:
        raise TaskSkipped(str(exc)) from exc
    if constants:
        texts = [with_constant_operands(t, task.root.op, constants) for t in texts]
    text = texts[0]
    if len({dataflow(t) for t in texts}) > 1:
        raise TaskSkipped(
            "its dispatches differ in how their ops connect around the root, and one kernel "
            "match takes them all: fuse_ext plans one of them"
        )
    ops = group_tasks(dispatch_census(text, target), task.name)
    softmax = as_softmax(text) if not _forms(ops, task) else None
    if softmax is not None:  # IREE splits a decomposed softmax: give it the op itself
        text, ops = softmax, group_tasks(dispatch_census(softmax, target), task.name)
    if not _forms(ops, task):
        found = "; ".join(" ".join(o.describe() for o in t.ops) for t in ops) or "no dispatch"
        raise TaskSkipped(f"IREE forms a different dispatch from it on its own ({found})")
    write_atomically(path, text.encode())
    return TaskWorkload(path, task.name, configure(text, task.name, target))


def _forms(formed: Sequence[Task], task: Task) -> bool:
    """Whether ``formed`` (the tasks of a standalone workload) is ``task``'s dispatch."""
    return len(formed) == 1 and formed[0].ops == task.ops


def configure(text: str, function: str, target: Target) -> ConfiguredDispatch:
    """IREE's kernel configuration of the one dispatch IREE forms from ``function`` in
    ``text``. Raises :class:`TaskSkipped` when IREE cannot configure it."""
    with tempfile.TemporaryDirectory(prefix="tdsched-configure-") as tmp:
        source, out = Path(tmp) / "task.mlir", Path(tmp) / "configured.mlir"
        source.write_text(text)
        try:
            run_compile(CompileRequest(source, target, out, None, CONFIGURE_FLAGS))
            found = read_configured(out.read_text(), f"{function}_dispatch_")
        except (CompileError, ScheduleError) as exc:
            raise TaskSkipped(f"IREE's configuration of it cannot be read: {exc}") from exc
    if len(found) != 1:
        raise TaskSkipped(f"IREE forms {len(found)} dispatches from it")
    return found[0]
