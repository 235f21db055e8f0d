"""Ranked result tables, shared by ``tdsched sweep`` and ``tdsched report``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..text_table import aligned
from .database import Result, drift


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def ranked_table(
    ranked: Sequence[Result], failed: Sequence[Result], names: Sequence[str], top: int
) -> str:
    """The best ``top`` correct candidates, then a line per failure kind.

    Columns: rank, each swept parameter, median ms, IREE default's median ms timed beside
    it, speedup over IREE default measured in the sweep, speedup from the confirmation
    round (interleaved with IREE default), and the largest error against the reference.
    """
    header = ["#", *names, "ms", "base_ms", "speedup", "confirmed", "max_err"]
    rows = [
        [
            str(i + 1),
            *(str(r.params.get(n, "")) for n in names),
            _fmt(r.time_ms, ".4g"),
            _fmt(r.baseline_ms, ".4g"),
            _fmt(r.speedup, ".3f") + ("x" if r.speedup is not None else ""),
            _fmt(r.confirmed_speedup, ".3f") + ("x" if r.confirmed_speedup is not None else ""),
            _fmt(r.max_abs_error, ".2g"),
        ]
        for i, r in enumerate(ranked[:top])
    ]
    lines = aligned([header, *rows], right=True)
    if len(ranked) > top:
        lines.append(f"... {len(ranked) - top} more correct candidates (--top N shows more)")
    kinds: dict[str, list[Result]] = {}
    for r in failed:
        kinds.setdefault(r.status, []).append(r)
    for status, results in sorted(kinds.items()):
        example = results[0]
        params = ", ".join(f"{n}={example.params.get(n)}" for n in names)
        lines.append(f"{status}: {len(results)} (e.g. {params}: {cause(example.error)})")
    return "\n".join(lines)


def cause(error: str | None) -> str:
    """One line saying why a candidate failed: the error's first line, and when that only
    introduces what follows (``iree-compile failed (exit 1):``), the first line after it
    that says what went wrong."""
    lines = [ln.strip() for ln in (error or "").splitlines() if ln.strip()]
    if not lines:
        return "no message"
    if not lines[0].endswith(":") or len(lines) == 1:
        return lines[0]
    detail = next((ln for ln in lines[1:] if "error:" in ln), lines[1])
    return f"{lines[0]} {detail}"


def baseline_line(baselines: Mapping[str, float]) -> str:
    """IREE default's median at the start and the end of a sweep, and the drift."""
    if "start" not in baselines:
        return "IREE default not timed (no candidate was timed)"
    change = drift(baselines)
    end = (
        f", {baselines['end']:.4g} ms at the end (drift {change:+.1%})"
        if change is not None
        else ""
    )
    return f"IREE default {baselines['start']:.4g} ms at the start{end}"
