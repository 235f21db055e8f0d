"""Workloads: linalg-on-tensors modules with seeded inputs and a numpy reference.

The workload model itself (:class:`~tdsched.targets.workload.Workload`, file loading,
seeded random inputs) lives in :mod:`tdsched.targets.workload`; this package holds the
content: generators, lowered models and files.
"""

from .registry import GENERATORS, generate

__all__ = ["GENERATORS", "generate"]
