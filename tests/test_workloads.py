"""Workload generators: their numpy references agree with IREE's default build."""

from __future__ import annotations

import numpy as np
import pytest
from tdsched.recipes.workloads import generate
from tdsched.recipes.workloads.generators import WEIGHT_SEED
from tdsched.schedules.compile.pipeline import plan
from tdsched.schedules.frontends.python_api import RecipeBuilder, generator
from tdsched.schedules.measure.run_report import run
from tdsched.targets.random_data import random_arrays
from tdsched.targets.workload import WorkloadError, input_types, random_inputs

CASES = [
    ("matmul", {"M": 33, "N": 17, "K": 65}),
    ("matmul_bias_relu", {"M": 64, "N": 48, "K": 32}),
    ("conv2d_nhwc", {"N": 1, "H": 12, "W": 10, "C": 8, "F": 4}),
    ("conv2d_nhwc", {"N": 2, "H": 9, "W": 7, "C": 4, "F": 6, "stride": 2, "weights": "constant"}),
    ("matmul", {"M": 33, "N": 17, "K": 65, "weights": "constant"}),
    ("matmul_bias_relu", {"M": 64, "N": 48, "K": 32, "weights": "constant"}),
    ("softmax", {"M": 24, "N": 40}),
    ("matmul_bias_act", {"M": 64, "N": 48, "K": 32, "act": "gelu"}),
    ("matmul_bias_act", {"M": 64, "N": 48, "K": 32, "act": "silu", "weights": "constant"}),
    ("depthwise_conv2d_nhwc", {"N": 2, "H": 9, "W": 7, "C": 8}),
    ("depthwise_conv2d_nhwc", {"N": 1, "H": 10, "W": 10, "C": 16, "stride": 2}),
    ("row_norm", {"M": 24, "N": 40}),
    ("row_norm", {"M": 24, "N": 40, "norm": "rmsnorm"}),
    ("batch_matmul", {"B": 3, "M": 17, "N": 20, "K": 33}),
    ("attention", {"H": 2, "S": 24, "D": 16}),
]


@pytest.mark.parametrize(("name", "args"), CASES)
def test_reference_matches_iree_default(name: str, args: dict[str, int], target: str) -> None:
    recipe = RecipeBuilder(
        f"{name}_default", workload=generator(name, **args), targets=[target]
    ).build()
    report = run(plan(recipe), time_it=False)  # no schedules: IREE's default vs numpy
    assert report.status == "ok", report


def test_conv_shapes_and_padding() -> None:
    w = generate("conv2d_nhwc", {"N": 1, "H": 5, "W": 5, "C": 2, "F": 3, "pad": 1})
    assert input_types(w) == [((1, 5, 5, 2), "f32"), ((3, 3, 2, 3), "f32")]
    x, f = random_inputs(w)
    (y,) = w.reference([x, f])
    assert y.shape == (1, 5, 5, 3)
    # the centre output sees the full 3x3 window ...
    centre = sum(x[0, 1 + i, 1 + j] @ f[i, j] for i in range(3) for j in range(3))
    assert y[0, 2, 2] == pytest.approx(centre, rel=1e-5)
    # ... the corner only the 2x2 part inside the image (the rest is zero padding)
    corner = sum(x[0, i - 1, j - 1] @ f[i, j] for i in (1, 2) for j in (1, 2))
    assert y[0, 0, 0] == pytest.approx(corner, rel=1e-5)


def test_a_strided_conv_reads_every_stride_th_window() -> None:
    w = generate("conv2d_nhwc", {"N": 1, "H": 7, "W": 7, "C": 2, "F": 3, "pad": 0, "stride": 2})
    assert w.name == "conv2d_nhwc_1x7x7x2_3_s2_f32"
    x, f = random_inputs(w)
    (y,) = w.reference([x, f])
    assert y.shape == (1, 3, 3, 3)
    window = sum(x[0, 2 + i, 4 + j] @ f[i, j] for i in range(3) for j in range(3))
    assert y[0, 1, 2] == pytest.approx(window, rel=1e-5)


def test_the_activations_are_what_their_names_say() -> None:
    """relu, the exact (erf) GELU and SiLU at known points: GELU(1) = 0.8413447,
    SiLU(1) = 0.7310586 (1 x sigmoid(1))."""
    x = np.array([[1.0, -2.0]], dtype=np.float32)
    b, bias = np.eye(2, dtype=np.float32), np.zeros(2, dtype=np.float32)
    expected = {
        "relu": [1.0, 0.0],
        "gelu": [0.8413447, -0.0455003],
        "silu": [0.7310586, -0.2384058],
    }
    for act, want in expected.items():
        w = generate("matmul_bias_act", {"M": 1, "N": 2, "K": 2, "act": act})
        assert w.reference is not None
        np.testing.assert_allclose(w.reference([x, b, bias])[0][0], want, rtol=1e-6)


def test_norms_give_unit_rows() -> None:
    """With gamma 1 (and beta 0), layernorm's rows have mean 0 and variance 1, and
    rmsnorm's a mean square of 1 (eps aside)."""
    x = np.random.default_rng(0).uniform(-1, 1, size=(4, 64)).astype(np.float32)
    ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
    layer = generate("row_norm", {"M": 4, "N": 64})
    rms = generate("row_norm", {"M": 4, "N": 64, "norm": "rmsnorm"})
    assert layer.reference is not None and rms.reference is not None
    assert input_types(rms) == [((4, 64), "f32"), ((64,), "f32")]
    (y,) = layer.reference([x, ones, zeros])
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-6)
    np.testing.assert_allclose(y.var(axis=1), 1, rtol=1e-3)
    (z,) = rms.reference([x, ones])
    np.testing.assert_allclose((z.astype(np.float64) ** 2).mean(axis=1), 1, rtol=1e-3)


def test_depthwise_filters_each_channel_alone() -> None:
    w = generate("depthwise_conv2d_nhwc", {"N": 1, "H": 5, "W": 5, "C": 3, "pad": 1})
    assert input_types(w) == [((1, 5, 5, 3), "f32"), ((3, 3, 3), "f32")]
    x, f = random_inputs(w)
    (y,) = w.reference([x, f])
    assert y.shape == (1, 5, 5, 3)
    centre = sum(x[0, 1 + i, 1 + j] * f[i, j] for i in range(3) for j in range(3))
    np.testing.assert_allclose(y[0, 2, 2], centre, rtol=1e-5)


def test_inputs_are_seeded() -> None:
    w = generate("matmul", {"M": 4, "N": 4, "K": 4})
    assert (random_inputs(w, seed=3)[0] == random_inputs(w, seed=3)[0]).all()
    assert not (random_inputs(w, seed=3)[0] == random_inputs(w, seed=4)[0]).all()


def test_random_inputs_are_the_runtime_only_draw_of_the_same_types() -> None:
    """What a machine without the compiler draws (benchmarks/vulkan_gpu.py) is what
    ``tdsched run`` draws."""
    w = generate("matmul_bias_relu", {"M": 8, "N": 16, "K": 4, "dtype": "f32"})
    drawn = random_arrays(input_types(w), 5)
    assert all((a == b).all() for a, b in zip(drawn, random_inputs(w, seed=5), strict=True))


def test_constant_weights_leave_only_the_activations_as_arguments() -> None:
    given = generate("matmul_bias_relu", {"M": 6, "N": 5, "K": 4})
    fixed = generate("matmul_bias_relu", {"M": 6, "N": 5, "K": 4, "weights": "constant"})
    assert fixed.name == "matmul_bias_relu_6x5x4_f32_constant_weights"
    assert input_types(fixed) == [((6, 4), "f32")]
    assert fixed.mlir.count("arith.constant dense<") == 2
    # the constants are the seeded weights, and the reference and peer use the same ones
    rng = np.random.default_rng(WEIGHT_SEED)
    b = rng.uniform(-1.0, 1.0, size=(4, 5)).astype(np.float32)
    bias = rng.uniform(-1.0, 1.0, size=(5,)).astype(np.float32)
    (a,) = random_inputs(fixed)
    assert fixed.reference is not None and given.reference is not None
    assert (fixed.reference([a])[0] == given.reference([a, b, bias])[0]).all()
    assert fixed.peer is not None
    np.testing.assert_allclose(fixed.peer([a])[0], given.reference([a, b, bias])[0], rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        (
            "matmul",
            {"M": 4, "N": 4, "K": 4, "weights": "frozen"},
            "weights must be one of \\('input', 'constant'\\), got 'frozen'",
        ),
        ("matmul", {"M": 0, "N": 4, "K": 4}, "M must be a positive integer"),
        ("matmul", {"M": 4, "N": 4, "K": 4, "dtype": "i4"}, "dtype 'i4' is not supported"),
        ("matmul", {"M": 4, "N": 4}, "argument 'K' is required"),
        ("gemm", {}, "unknown generator 'gemm'; available: matmul"),
        ("matmul_bias_act", {"M": 4, "N": 4, "K": 4, "act": "tanh"}, "act must be one of"),
        ("row_norm", {"M": 4, "N": 4, "norm": "batchnorm"}, "norm must be one of"),
        ("depthwise_conv2d_nhwc", {"N": 1, "H": 2, "W": 2, "C": 1, "pad": 0}, "larger than"),
    ],
)
def test_generator_errors(name: str, args: dict[str, int], message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        generate(name, args)
