"""What a build is for and how it runs: one frozen value that every command passes on.

A build setting (the x86 CPU and its features, the Vulkan GPU, the CPU threads) lives here
and nowhere else: requests that cross to a child process or a sweep worker carry a
:class:`BuildTarget` (as JSON, rebuilt by :meth:`BuildTarget.from_json`), and what is
derived from the settings — IREE's target flags, the machine a shape table keys on, the
values ``when`` conditions read, the ``tdsched run`` options that rebuild it — is a
method of it. docs/architecture.md shows how a new setting is added.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tdsched.targets.target import (
    DEFAULT_THREADS,
    BuildMachine,
    Target,
    build_machine,
    cpu_threads,
    make_target,
)

from ..dsl.build_names import build_values


@dataclass(frozen=True)
class BuildTarget:
    """A build's target and the machine settings it is built and run with.

    ``target`` is ``x86`` or ``vulkan``; None where the command line named none and the
    recipe's first target applies (:meth:`resolved` fills it in; the other methods need
    it). ``cpu`` / ``cpu_features`` choose the x86 CPU (LLVM names; ``host``: this
    machine), ``gpu`` IREE's Vulkan target (None: the generic one), ``threads`` the CPU
    threads an x86 build runs on (ignored on a GPU target; None: not known, and a shape
    table then ignores its entries' thread counts). Options that do not belong to
    the target are refused by :attr:`compile_target` (ValueError, in the command line's
    words), which every build reaches.
    """

    target: str | None
    cpu: str = "host"
    cpu_features: str | None = None
    gpu: str | None = None
    threads: int | None = DEFAULT_THREADS

    def resolved(self, default: str) -> BuildTarget:
        """This build, on ``default`` (a recipe's first target) where none was named."""
        return self if self.target is not None else dataclasses.replace(self, target=default)

    @property
    def name(self) -> str:
        """The target's name; precondition: the target is known (:meth:`resolved`)."""
        if self.target is None:
            raise ValueError("the build's target is not known yet: resolve it first")
        return self.target

    @property
    def compile_target(self) -> Target:
        """IREE's backend, runtime driver and target flags for this build."""
        return make_target(self.name, cpu=self.cpu, cpu_features=self.cpu_features, gpu=self.gpu)

    @property
    def machine(self) -> BuildMachine:
        """The CPU (vector ISA, model) or GPU the build targets, as shape tables key it."""
        return build_machine(self.name, self.cpu, self.cpu_features, self.gpu)

    @property
    def cpu_threads(self) -> int | None:
        """The CPU threads the build runs on; None on a GPU target."""
        return cpu_threads(self.name, self.threads)

    @property
    def run_threads(self) -> int:
        """The CPU threads to run on: ``threads``, or the default where not known."""
        return self.threads or DEFAULT_THREADS

    def build_values(self) -> dict[str, str]:
        """What ``when`` conditions and constraints read of the build (``TARGET``,
        ``ISA``, ``GPU``: :mod:`..build_names`)."""
        return build_values(self.name, self.machine)

    def run_flags(self) -> list[str]:
        """The ``tdsched run`` options that rebuild and rerun this build, those that are
        not the defaults: printed beside a recipe a command writes, since a recipe keeps
        parameters and not these."""
        flags: list[str] = []
        if self.compile_target.is_gpu:
            return ["--gpu", self.gpu] if self.gpu is not None else flags
        if self.cpu != "host":
            flags += ["--cpu", self.cpu]
        if self.cpu_features:
            flags.append(f"--cpu-features={self.cpu_features}")
        if self.threads not in (None, DEFAULT_THREADS):
            flags += ["--threads", str(self.threads)]
        return flags

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildTarget:
        """The build :func:`dataclasses.asdict` gave as ``data`` (a request that crossed to
        a child process or a sweep worker as JSON)."""
        return cls(**data)


RECIPE_DEFAULT = BuildTarget(None)
"""A build on the recipe's first target with the default settings."""
