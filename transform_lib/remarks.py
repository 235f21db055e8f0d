"""Remarks that prove a schedule step applied to at least one payload op.

iree-compile and the in-process interpreter stay silent when a handle is empty (a match
that found nothing makes later steps no-ops). Each step that must apply prints a titled
marker for its payload ops (``transform.print`` without regions: the one diagnostic-like
op iree-compile's transform libraries accept; ``transform.debug.*`` is not registered
there); the caller requires every expected marker to appear on stdout.
"""

from __future__ import annotations

import re

from iree.compiler.dialects import transform

from .script import LoopHandle, OpHandle

PREFIX = "tdsched: "


def kernel_applied(kernel: str) -> str:
    """Remark text emitted when kernel schedule ``kernel`` is attached to a dispatch."""
    return f"{PREFIX}applied kernel schedule '{kernel}'"


def kernel_after_schedule(kernel: str) -> str:
    """Title of the dispatch IR a strategy prints after the user's steps (``tdsched apply``)."""
    return f"{PREFIX}kernel '{kernel}' after schedule"


TRACE_PREFIX = "tdsched-trace: "


def step_snapshot(scope: str, step: int) -> str:
    """Title of the IR a schedule prints after its step ``step`` (1-based; 0: before its
    first step), for ``tdsched explain`` and ``tdsched apply --step/--diff``."""
    return f"{TRACE_PREFIX}{scope} after step {step}"


_SNAPSHOT = re.compile(rf"^{re.escape(TRACE_PREFIX)}(.*) after step (\d+)$")


def snapshot_sections(output: str) -> list[tuple[str, int, str]]:
    """The ``(scope, step, printed IR)`` triples of :func:`step_snapshot` in ``output``,
    in the order printed."""
    found = []
    for title, body in printed_sections(output):
        match = _SNAPSHOT.match(title)
        if match:
            found.append((match.group(1), int(match.group(2)), body))
    return found


def step_matched(scope: str, handle: str) -> str:
    """Remark text emitted when a ``match`` step in ``scope`` bound ``handle`` to ops."""
    return f"{PREFIX}{scope} matched '{handle}'"


_HEADER = re.compile(r"^\[\[\[ IR printer: (.*?) \]\]\]$", re.MULTILINE)


def step_produced(scope: str, primitive: str, index: int, result: str) -> str:
    """Remark text emitted for the ``result`` (``op`` or ``loops``) of step ``index``
    (0-based) of ``scope``'s schedule, a ``primitive`` step. The handle's name is not in
    it: front ends name handles differently, and their scripts must be identical."""
    return f"{PREFIX}{scope} step {index} ({primitive}) produced {result}"


def emit_remark(handle: OpHandle | LoopHandle, text: str) -> None:
    """Print the marker ``text`` followed by the payload ops of ``handle`` (one line each)."""
    transform.PrintOp(target=handle.value, name=text, skip_regions=True)


def print_ir(handle: OpHandle, title: str) -> None:
    """Print the payload ops of ``handle`` in full under ``title``."""
    transform.PrintOp(target=handle.value, name=title)


def printed_sections(output: str) -> list[tuple[str, str]]:
    """The ``(title, printed IR)`` pairs ``transform.print`` wrote into ``output``.

    The title is printed even for an empty handle, so an empty IR part means no op.
    """
    parts = _HEADER.split(output)
    return [(parts[i], parts[i + 1].strip("\n")) for i in range(1, len(parts) - 1, 2)]


def _count_remarks(output: str, with_ops: bool) -> dict[str, int]:
    counts: dict[str, int] = {}
    for title, body in printed_sections(output):
        if title.startswith(PREFIX) and bool(body.strip()) == with_ops:
            counts[title] = counts.get(title, 0) + 1
    return counts


def found_remarks(output: str) -> dict[str, int]:
    """Count, per tdsched marker in ``output``, the times it was printed with ops under it."""
    return _count_remarks(output, with_ops=True)


def empty_remarks(output: str) -> dict[str, int]:
    """Count, per tdsched marker in ``output``, the times it was printed for no op: a
    handle that came out empty where its step ran (e.g. in one of several dispatches a
    kernel schedule applies to)."""
    return _count_remarks(output, with_ops=False)
