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

from .script import OpHandle

PREFIX = "tdsched: "


def kernel_applied(kernel: str) -> str:
    """Remark text emitted when kernel schedule ``kernel`` is attached to a dispatch."""
    return f"{PREFIX}applied kernel schedule '{kernel}'"


def step_matched(scope: str, handle: str) -> str:
    """Remark text emitted when a ``match`` step in ``scope`` bound ``handle`` to ops."""
    return f"{PREFIX}{scope} matched '{handle}'"


_PRINTED = re.compile(r"\[\[\[ IR printer: (" + re.escape(PREFIX) + r".*?) \]\]\]")


def emit_remark(handle: OpHandle, text: str) -> None:
    """Print the marker ``text`` once per payload op of ``handle`` (never if it is empty)."""
    transform.PrintOp(target=handle.value, name=text, skip_regions=True)


def print_ir(handle: OpHandle, title: str) -> None:
    """Print the payload ops of ``handle`` in full under ``title``."""
    transform.PrintOp(target=handle.value, name=title)


def found_remarks(output: str) -> dict[str, int]:
    """Count the markers in ``output`` (what a transform run printed)."""
    counts: dict[str, int] = {}
    for text in _PRINTED.findall(output):
        counts[text] = counts.get(text, 0) + 1
    return counts
