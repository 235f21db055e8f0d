"""A numpy reference evaluator for tensor-level MLIR (linalg, tensor, scf, arith, math,
affine), and the BEFORE/AFTER equivalence check behind ``tdsched check``.

Payload-level schedules leave host-level ``scf.for``/``scf.forall`` loops that IREE cannot
compile; evaluating the module before and after the schedule on the same inputs checks
them without a compiler.
"""

from .compare import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    CheckReport,
    OutputCheck,
    check_equivalent,
    check_files,
)
from .errors import EvalError
from .evaluator import evaluate, evaluate_fills, evaluate_reference, supported_ops

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "CheckReport",
    "EvalError",
    "OutputCheck",
    "check_equivalent",
    "check_files",
    "evaluate",
    "evaluate_fills",
    "evaluate_reference",
    "supported_ops",
]
