"""tune's matmul templates start from the shipped kernel: matmul_x86's shape-table choice
for the task's shape, B's constness and the build becomes the template's defaults, the
candidate a sweep evaluates first (schedules/tune/seeds.py)."""

from __future__ import annotations

from tdsched.schedules.compile.build_target import BuildTarget
from tdsched.schedules.dsl.params import resolved_values
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.tune.seeds import KERNEL_NAMES, seeded
from tdsched.schedules.tune.tasks import OpSignature, Task
from tdsched.schedules.tune.templates import template_for
from tdsched.transform_lib.dispatch_config import ConfiguredDispatch, ConfiguredOp

ZEN4 = BuildTarget("x86", cpu="znver4", threads=1)


def _matmul(m: int, n: int, k: int) -> tuple[Task, ConfiguredDispatch]:
    """A named layer's fill + ``linalg.matmul`` task, IREE's tiles on it."""
    parallel = ("parallel", "parallel")
    dispatch = ConfiguredDispatch(
        "t0_dispatch_0",
        (
            ConfiguredOp("linalg.fill", (m, n), parallel, (0, 1), {}),
            ConfiguredOp(
                "linalg.matmul",
                (m, n, k),
                (*parallel, "reduction"),
                (0, 1),
                {"distribution": (64, 64, 0), "vector_common_parallel": (8, 32, 0)},
            ),
        ),
        root=1,
        root_reads={},
        init_is_fill=True,
        root_inputs=2,
    )
    signature = OpSignature("linalg.matmul", (m, n, k), "contraction", "f32")
    return Task("t0", (signature,), dispatches=["d0"], layers=["ffn.up"]), dispatch


def _shipped(m: int, n: int, k: int, weights: str) -> dict[str, object]:
    """What ``tdsched run matmul_x86`` runs at this shape on ZEN4."""
    shape = {"M": m, "N": n, "K": k, "WEIGHTS": weights}
    values, _ = resolved_values(load("matmul_x86"), shape, 1, "x86", ZEN4.machine)
    return values


def test_a_matmul_template_starts_from_the_shipped_row_major_kernel() -> None:
    task, dispatch = _matmul(512, 512, 512)
    plain = template_for(task, dispatch)
    shipped = _shipped(512, 512, 512, "input")
    template = seeded(plain, dispatch, ZEN4)
    assert shipped["LAYOUT"] == "rowmajor"
    assert template.parameters["LAYOUT"] == "rowmajor"
    for theirs, mine in KERNEL_NAMES.items():
        assert template.parameters[mine] == shipped[theirs]
        assert shipped[theirs] in template.space[mine]
    assert template.parameters != plain.parameters  # not IREE's tiles any more
    assert template.constraints == plain.constraints


def test_constant_weights_seed_the_packed_kernel() -> None:
    task, dispatch = _matmul(128, 3072, 768)
    shipped = _shipped(128, 3072, 768, "constant")
    assert shipped["LAYOUT"] == "packed"
    template = seeded(template_for(task, dispatch), dispatch, ZEN4, constant_inputs={1})
    seed = {name: template.parameters[name] for name in ("LAYOUT", "M0", "N0", "UNPACK")}
    assert seed == {name: shipped[name] for name in seed}


def test_a_seed_that_breaks_the_template_s_constraints_is_left_out() -> None:
    """A 4x4x4 matmul: the shipped entry's tiles do not divide it, so the template
    keeps IREE's."""
    task, dispatch = _matmul(4, 4, 4)
    plain = template_for(task, dispatch)
    assert seeded(plain, dispatch, ZEN4) == plain


def test_where_the_shipped_table_runs_iree_the_template_keeps_iree_s_tiles() -> None:
    """matmul_x86's 256³ entry on one AVX-512 thread builds IREE default."""
    task, dispatch = _matmul(256, 256, 256)
    plain = template_for(task, dispatch)
    assert seeded(plain, dispatch, ZEN4) == plain
