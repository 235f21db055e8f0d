"""Value types that recipe fields hold: integers that may be parameters, op selections.

Integer fields may hold a parameter reference ``"${NAME}"`` until
:func:`tdsched.schedules.dsl.params.resolve` substitutes it.
"""

from __future__ import annotations

from tdsched.transform_lib.match import OP_KINDS, Criteria

IntOrParam = int | str
"""An integer, or a ``"${NAME}"`` parameter reference awaiting substitution."""

ROOT = "root"
"""Handle name of the op a kernel schedule matched (its dispatch root)."""


MatchSpec = Criteria[IntOrParam]
"""Which ops a kernel schedule (or a ``match`` step) selects, as a recipe writes it: the
matchers' :data:`~tdsched.transform_lib.match.OpCriteria` whose ``shape`` may still hold
parameter references, and whose ``layers`` may be ``*`` / ``?`` patterns over the names
of the workload's layers (``tdsched.layer``), which plan time expands to exact names
(:mod:`.layers`); :func:`.resolved.criteria_of` makes the matchers' criteria of it."""


MATCH_FIELDS: dict[str, str] = {
    "op": "operation name, e.g. linalg.matmul",
    "kind": " or ".join(OP_KINDS),
    "shape": "static loop bounds, e.g. [M, N, K]",
    "dtype": "element type, default f32",
    "inputs": "number of input operands (ins) the op has: tells ops of one dispatch apart",
    "used_by": "the one op using its result, by name (linalg.generic) or as {op: NAME, "
    "inputs: N}: tells apart ops with and without an epilogue",
    "body": "a linalg.generic's body as MLIR text, from ^bb0(...): to its linalg.yield "
    "(as tdsched apply prints it): tells apart ops that differ only in what they compute",
    "attributes": "attributes the op carries: [NAME, ...] (unit) or {NAME: VALUE}",
    "layer": "model layer name(s) or patterns, e.g. block1.conv1 or [stem, 'block*.conv1']",
}
"""The keys of an op selection as recipes write it (``match: {op: ..., kind: ...}``)."""

OPS_FIELDS: dict[str, str] = {k: MATCH_FIELDS[k] for k in ("op", "attributes", "layer")}
"""The keys of a graph rewrite's ``ops`` selection (kinds and shapes select kernels)."""
