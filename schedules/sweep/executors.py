"""The executors a sweep or a tune may run on, by the name ``--executor`` gives.

``local`` runs workers as processes of this machine (:mod:`.executor`); ``ray`` runs them
on a Ray cluster (:mod:`.ray_executor`, which imports Ray only when one is made).
"""

from __future__ import annotations

from .executor import Executor, Limits, LocalExecutor
from .ray_executor import RayExecutor

EXECUTORS = ("local", "ray")
"""The executors ``--executor`` names: this machine's processes, or a Ray cluster."""


def make_executor(
    kind: str, jobs: int | None, limits: Limits | None = None, ray_address: str | None = None
) -> Executor:
    """The executor ``kind`` (:data:`EXECUTORS`) with ``jobs`` compile workers; for
    ``ray``, the cluster at ``ray_address`` (``None``: a local one it starts)."""
    if kind == "ray":
        return RayExecutor(jobs, limits, address=ray_address)
    if kind != "local":
        raise ValueError(f"executor {kind!r}: use one of {', '.join(EXECUTORS)}")
    return LocalExecutor(jobs, limits)
