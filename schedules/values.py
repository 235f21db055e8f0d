"""Value types that recipe fields hold: integers that may be parameters, op selections.

Integer fields may hold a parameter reference ``"${NAME}"`` until
:func:`tdsched.schedules.params.resolve` substitutes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tdsched.transform_lib.match import AttrValue, OpKind

IntOrParam = int | str
"""An integer, or a ``"${NAME}"`` parameter reference awaiting substitution."""

ROOT = "root"
"""Handle name of the op a kernel schedule matched (its dispatch root)."""


@dataclass(frozen=True)
class MatchSpec:
    """Which ops a kernel schedule (or a ``match`` step) selects. See OpCriteria.

    ``layers`` are layer names or ``*`` / ``?`` patterns over the names of the workload's
    layers (``tdsched.layer``); plan time expands them to exact names. ``attributes``
    pairs a name with the value it must have (``None``: a unit attribute).
    """

    op: str | None = None
    kind: OpKind | None = None
    shape: tuple[IntOrParam, ...] | None = None
    dtype: str = "f32"
    attributes: tuple[tuple[str, AttrValue | None], ...] = ()
    layers: tuple[str, ...] = ()
