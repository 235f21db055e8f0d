"""Plain-text tables for terminals: columns padded to their widest cell."""

from __future__ import annotations

from collections.abc import Sequence


def aligned(rows: Sequence[Sequence[str]], right: bool = False) -> list[str]:
    """Each row as one line, cells two spaces apart, padded (left-aligned, or
    right-aligned for ``right``) to their column's widest cell; no trailing spaces."""
    if not rows:
        return []
    widths = [max(len(c) for c in column) for column in zip(*rows, strict=True)]
    pad = str.rjust if right else str.ljust
    return ["  ".join(pad(c, w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
