"""Test helper: compile a module with IREE's default pipeline and compare it with another.

Graph rewrites are checked by compiling the module before and after the rewrite for a
real target (x86 or Vulkan) and comparing their results on the same seeded inputs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from iree.compiler import ir
from tdsched.targets import make_target
from tdsched.targets.compiler import CompileRequest, run_compile
from tdsched.targets.runtime import LoadedModule
from tdsched.targets.workload import Workload, random_inputs


def run_module(
    module_text: str, function: str, inputs: list[np.ndarray], target: str
) -> list[np.ndarray]:
    """Compile ``module_text`` for ``target`` with IREE and run ``@function`` once."""
    t = make_target(target)
    with tempfile.TemporaryDirectory(prefix="tdsched-test-") as tmp:
        source = Path(tmp) / "m.mlir"
        source.write_text(module_text)
        result = run_compile(CompileRequest(source, t, Path(tmp) / "m.vmfb"))
        return LoadedModule(result.output, t.driver, function).invoke(inputs)


def assert_same_results(
    before: str, after: str, function: str, target: str, *, atol: float = 1e-5, seed: int = 0
) -> None:
    """Both modules, compiled by IREE for ``target``, agree on seeded random inputs."""
    inputs = random_inputs(Workload("test", before, function, None), seed)
    want = run_module(before, function, inputs, target)
    got = run_module(after, function, inputs, target)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=atol, rtol=1e-5)


def assert_matches_numpy(
    before: str,
    after: str,
    function: str,
    target: str,
    expected: Callable[[list[np.ndarray]], list[np.ndarray]],
    *,
    atol: float = 1e-5,
) -> None:
    """``after`` (a rewrite of ``before``), compiled by IREE for ``target``, gives
    ``expected(inputs)`` on ``before``'s seeded random inputs."""
    inputs = random_inputs(Workload("test", before, function, None), seed=0)
    got = run_module(after, function, inputs, target)
    for g, want in zip(got, expected(inputs), strict=True):
        np.testing.assert_allclose(g, want, atol=atol, rtol=1e-5)


def op_names(text: str) -> list[str]:
    """The names of every op of the module ``text``, in walk order."""
    names: list[str] = []
    with ir.Context():

        def visit(op: ir.Operation) -> ir.WalkResult:
            names.append(op.name)
            return ir.WalkResult.ADVANCE

        ir.Module.parse(text).operation.walk(visit)
    return names
