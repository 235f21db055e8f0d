"""The shipped x86 recipes at shapes that no power of two divides: a tile that does not
divide its loop leaves tiles of dynamic size, which do not vectorize (the whole kernel runs
scalar: ``matmul_x86``'s 64-row tile at M=196 ran 0.04x IREE default). Each recipe's
constraints say which tiles must divide which loops, so its shape table takes an entry
whose tiles do (or a packed one, which pads), and where none fits IREE's own pipeline
runs. These resolve the recipes for an AVX-512 and an AVX2 CPU, 1 and 2 threads."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.dsl.recipe import Recipe
from tdsched.schedules.dsl.space import ParamValue
from tdsched.schedules.frontends.loading import load
from tdsched.targets.cpu_model import BuildCpu, build_cpu


def _divides(size: int, tile: int, inner: int = 1) -> bool:
    """Whether ``tile`` (a tile larger than its loop covers it whole) and ``inner`` within
    it leave no partial tile of a loop of ``size``."""
    whole = min(tile, size)
    return size % whole == 0 and whole % inner == 0


def _resolved(name: str, shape: Mapping[str, ParamValue], threads: int, cpu: BuildCpu) -> Recipe:
    return resolve(load(name), shape, threads, "x86", cpu)


MACHINES = [build_cpu("znver4"), build_cpu("haswell")]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cpu", MACHINES, ids=lambda c: c.model)
@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("matmul_x86", {"M": 196, "N": 512, "K": 512, "WEIGHTS": "constant"}),
        ("matmul_x86", {"M": 200, "N": 3000, "K": 700}),
        ("matmul_bias_relu_x86", {"M": 100, "N": 1000, "K": 384}),
        ("matmul_bias_relu_x86", {"M": 196, "N": 768, "K": 768, "ACT": "gelu"}),
        ("batch_matmul_x86", {"B": 4, "M": 100, "N": 200, "K": 64}),
        ("matmul_chain_x86", {"M": 100, "N": 200, "K": 300, "P": 100}),
    ],
)
def test_a_row_major_matmul_tile_divides_m_and_n_or_the_recipe_does_not_use_it(
    name: str, shape: dict[str, int | str], cpu: BuildCpu, threads: int
) -> None:
    recipe = _resolved(name, shape, threads, cpu)
    choice = recipe.shape_choice
    assert choice is not None
    if choice.runs_iree_default:
        assert not recipe.kernels and not recipe.graph
        return
    values = recipe.parameter_dict
    if values.get("LAYOUT") == "packed":
        return
    m, n = int(shape["M"]), int(shape["N"])
    assert _divides(m, int(values["TM"]), int(values["RM"])), choice.describe()
    assert _divides(n, int(values["TN"]), int(values["RN"])), choice.describe()


@pytest.mark.parametrize("cpu", MACHINES, ids=lambda c: c.model)
def test_a_chain_whose_tiles_fit_nothing_says_iree_s_pipeline_runs_and_why(cpu: BuildCpu) -> None:
    recipe = _resolved("matmul_chain_x86", {"M": 100, "N": 200, "K": 300, "P": 100}, 1, cpu)
    choice = recipe.shape_choice
    assert choice is not None and choice.falls_back and not recipe.kernels
    said = choice.describe()
    assert "so IREE's own pipeline runs (no schedule)" in said
    assert "tdsched sweep RECIPE --shape M=100,N=200,K=300,P=100" in said
    # a tile given on purpose runs as asked, and the line names the constraint it breaks
    asked = resolve(
        load("matmul_chain_x86"), {"M": 100, "N": 200, "K": 300, "P": 100, "TM": 64}, 1, "x86", cpu
    )
    assert asked.kernels and "though they break" in str(
        asked.shape_choice and asked.shape_choice.describe()
    )


@pytest.mark.parametrize(
    ("shape", "form"),
    [({"H": 12, "S": 300, "D": 64}, "exp_once"), ({"H": 6, "S": 200, "D": 48}, "exp_once")],
)
def test_attention_s_fused_form_is_not_taken_where_its_tiles_leave_partial_ones(
    shape: dict[str, int], form: str
) -> None:
    values = _resolved("attention_x86", shape, 1, build_cpu("znver4")).parameter_dict
    assert values["FORM"] == form


def test_row_norm_s_fused_form_is_not_taken_where_its_tiles_leave_partial_ones() -> None:
    values = _resolved("row_norm_x86", {"M": 100, "N": 1000}, 1, build_cpu("znver4")).parameter_dict
    assert values["FORM"] == "iree"
