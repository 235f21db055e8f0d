"""Failures say their cause in tdsched's words: IREE's stack-allocation limit explained,
a stack limit above the worker threads' stacks named when a run crashes, a probe compile
that fails before printing reported with iree-compile's error, and a sweep's failure
summary names the error, not only that iree-compile failed."""

from __future__ import annotations

from pathlib import Path

import pytest
from tdsched.schedules.compile.pipeline import build, plan
from tdsched.schedules.frontends.python_api import Match, RecipeBuilder, generator
from tdsched.schedules.sweep.table import cause
from tdsched.targets.compiler import (
    CompileError,
    _error_excerpt,
    crash_message,
    explain,
    stack_crash_hint,
)

STACK = """\
/tmp/x/r.input.mlir:3:8: error: 'func.func' op exceeded stack allocation limit of 32768 bytes for function. Got 65536 bytes
  %c = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
"""


def test_the_stack_allocation_limit_is_explained_with_the_bound() -> None:
    hint = explain(STACK)
    assert hint is not None
    assert "need 65536 bytes of stack per thread, and IREE allows 32768" in hint
    assert "RM * RN * 4 <= 32768" in hint
    assert _error_excerpt(STACK).startswith(hint + "\n/tmp/x/r.input.mlir:3:8: error:")
    assert explain("error: something else") is None


def test_a_failure_summary_names_the_error_after_an_introduction() -> None:
    error = (
        "iree-compile failed (exit 1):\n\nr.yaml:9:1: error: could not fuse\n  - fuse_into: {}\n"
    )
    assert cause(error) == "iree-compile failed (exit 1): r.yaml:9:1: error: could not fuse"
    assert cause("max abs error 0.5 > 0.001") == "max abs error 0.5 > 0.001"
    assert cause(None) == "no message"


def test_a_target_attribute_dump_is_cut_from_the_excerpt() -> None:
    dump = '#hal.executable.target<"llvm-cpu", {cpu_features = "' + "+avx," * 500 + '"}>'
    stderr = f"r.yaml:9:1: error: could not fuse\nr.mlir:5:8: error: failed for backend {dump}\n"
    excerpt = _error_excerpt(stderr)
    assert excerpt.startswith("r.yaml:9:1: error: could not fuse\n")
    assert max(map(len, excerpt.splitlines())) < 400
    assert "more characters]" in excerpt


def test_an_iree_crash_is_one_line_naming_the_transform_op_and_keeping_the_dump() -> None:
    dump = (
        "PLEASE submit a bug report\n"
        " #7 0x00007f mlir::transform::detail::TransformOpInterfaceInterfaceTraits::Model"
        "<mlir::iree_compiler::IREE::transform_dialect::ForallToWorkgroupOp>::apply(...)\n"
    )
    message = crash_message(11, dump)
    assert message.startswith("iree-compile crashed (SIGSEGV) in ForallToWorkgroupOp: ")
    assert "\n" not in message
    path = Path(message.rsplit("its stack dump is in ", 1)[1])
    assert path.read_text() == dump
    path.unlink()
    abort = crash_message(6, "no frames")
    assert abort.startswith("iree-compile crashed (SIGABRT): ")
    Path(abort.rsplit("its stack dump is in ", 1)[1]).unlink()


def test_a_stack_limit_above_half_the_worker_stack_is_named_for_a_crash() -> None:
    flags = ["--iree-llvmcpu-stack-allocation-limit=262144"]
    hint = stack_crash_hint(flags, threads=2)
    assert hint is not None
    assert "allow 262144 bytes of stack per dispatch" in hint
    assert "IREE's CPU worker threads have 131072" in hint
    assert "at 65536 or below" in hint
    assert stack_crash_hint(flags, threads=1) is None  # local-sync: the caller's stack
    assert stack_crash_hint(["--iree-llvmcpu-stack-allocation-limit=65536"], 2) is None
    assert stack_crash_hint([], 2) is None


@pytest.mark.usefixtures("iree")
def test_a_flag_iree_compile_rejects_is_reported_by_the_fuse_ext_probe(tmp_path: Path) -> None:
    """A kernel-level fuse_ext is planned on a probe compile; one that fails before it
    prints (here a flag) says iree-compile's words, not 'matched no dispatch'."""
    r = RecipeBuilder("k", workload=generator("matmul", M=64, N=64, K=64))
    r.compile_flags("--iree-llvmcpu-stack-allocation-limit=98304")
    k = r.kernel("mm", match=Match(kind="contraction"))
    k.fuse_ext(None, [16, 16, 0])
    k.vectorize()
    with pytest.raises(CompileError) as error:
        build(plan(r.build()), tmp_path)
    assert "failed before it reached the dispatches tdsched asked it to print" in str(error.value)
    assert "not a power-of-two" in str(error.value)
