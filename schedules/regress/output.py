"""What ``tdsched regress`` prints: a table, a markdown summary for a CI comment, JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tdsched.targets.target import run_conditions

from ..base.text_table import aligned
from .runner import EntryResult, exit_status
from .verdict import GateStatus, gate_text

_ICONS = {
    GateStatus.PASS: "✅",
    GateStatus.BLESSED: "✅",
    GateStatus.INCONCLUSIVE: "⚠️",
}


def _speedup(result: EntryResult) -> str:
    s = result.measurement.speedup
    if s is None:
        return "-"
    return f"{s.median:.3f}x [{s.low:.3f}, {s.high:.3f}]"


def _gate(result: EntryResult) -> str:
    expected = result.entry.expected_speedup
    if expected is None:
        return "-"
    where = result.entry.gated_on
    return ">= " + gate_text(expected, result.settings) + (f" on {where}" if where else "")


def _rounds(result: EntryResult) -> str:
    s = result.measurement.speedup
    return "-" if s is None else f"{s.rounds} ({s.seconds:.0f} s)"


def _where(result: EntryResult) -> str:
    """The entry's target and, on x86, the worker threads it was measured with."""
    target = result.measurement.target or result.entry.target
    if target is None:
        return "-"
    return run_conditions(target, result.settings.threads)


def _row(result: EntryResult) -> list[str]:
    return [
        result.verdict.status.upper(),
        result.entry.label,
        _where(result),
        _speedup(result),
        _gate(result),
        _rounds(result),
    ]


_HEADER = ["STATUS", "ENTRY", "TARGET", "SPEEDUP [95% interval]", "GATE", "ROUNDS"]


def summary_line(results: Sequence[EntryResult]) -> str:
    counts = Counter(r.verdict.status for r in results)
    parts = [f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items())]
    noun = "entry" if len(results) == 1 else "entries"
    return f"{len(results)} {noun}: " + ", ".join(parts)


def table(results: Sequence[EntryResult]) -> str:
    """The results table, then each non-passing entry's reason."""
    lines = aligned([_HEADER, *(_row(r) for r in results)])
    for r in results:
        if r.verdict.status is not GateStatus.PASS:
            lines.append(f"{r.verdict.status.upper()} {r.entry.label}: {r.verdict.reason}")
    lines.append(summary_line(results))
    return "\n".join(lines)


def markdown(results: Sequence[EntryResult], title: str = "tdsched regress") -> str:
    """A summary for a CI comment or ``$GITHUB_STEP_SUMMARY``."""
    lines = [f"### {title}: {summary_line(results)}", ""]
    lines.append("| | " + " | ".join(h.lower() for h in _HEADER) + " |")
    lines.append("|---" * (len(_HEADER) + 1) + "|")
    for r in results:
        icon = _ICONS.get(r.verdict.status, "❌")
        cells = [icon, *(c.replace("|", "\\|") for c in _row(r))]
        lines.append("| " + " | ".join(cells) + " |")
    failing = [r for r in results if r.verdict.status is not GateStatus.PASS]
    if failing:
        lines.append("")
        for r in failing:
            reason = r.verdict.reason.strip().splitlines()
            lines.append(f"- **{r.entry.label}** ({r.verdict.status}): {reason[0]}")
            if len(reason) > 1:
                lines.append("  ```\n" + "\n".join(f"  {x}" for x in reason[1:]) + "\n  ```")
    return "\n".join(lines) + "\n"


def as_json(
    results: Sequence[EntryResult], baseline: str, updated: bool, machine: str | None
) -> str:
    """The run as one JSON document (``machine``: LLVM's name for this machine's CPU,
    which picks the entries' ``by_cpu`` expectations)."""
    document: dict[str, Any] = {
        "baseline": baseline,
        "updated": updated,
        "machine_cpu": machine,
        "summary": summary_line(results),
        "exit_status": exit_status(results),
        "entries": [r.as_dict() for r in results],
    }
    return json.dumps(document, indent=2)
