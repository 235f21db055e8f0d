"""The model builder's transformer layers (layer_norm, gelu, softmax, attention) and the
shipped ``encoder_layer``: compiled by IREE on x86 and Vulkan against the numpy
reference, the lowered IR's structure, the ONNX export against onnx's reference
evaluator and onnxruntime, and the errors."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from iree.compiler import ir
from iree_numerics import run_module
from tdsched.recipes.models import MODELS, Model, ModelError, encoder_layer


def _small_encoder() -> Model:
    """BERT's layer at a size that compiles in seconds: 16 tokens, 32 features in 4 heads."""
    return encoder_layer(tokens=16, hidden=32, heads=4, ffn=64)


def _inputs(model: Model) -> list[np.ndarray]:
    x = np.random.default_rng(1).uniform(-2.0, 2.0, size=model.input.shape)
    return [x.astype(np.float32)]


def _check_on(model: Model, target: str) -> None:
    inputs = _inputs(model)
    (got,) = run_module(model.to_linalg(), model.name, inputs, target)
    (want,) = model.reference(inputs)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.usefixtures("iree")
def test_the_encoder_layer_matches_its_reference_on_x86() -> None:
    _check_on(_small_encoder(), "x86")


def test_the_encoder_layer_matches_its_reference_on_vulkan(vulkan: None) -> None:
    _check_on(_small_encoder(), "vulkan")


@pytest.mark.usefixtures("iree")
def test_each_layer_alone_matches_its_reference() -> None:
    """Each layer as a model's only one, where an error cannot hide behind the next."""
    for make in (
        lambda m: m.layer_norm(m.input, epsilon=1e-3),
        lambda m: m.gelu(m.input),
        lambda m: m.softmax(m.input),
        lambda m: m.attention(m.input, m.input, m.input, heads=3),
    ):
        m = Model("one", (8, 24), seed=2)
        m.output(make(m))
        _check_on(m, "x86")


def test_the_reference_computes_what_the_layers_say() -> None:
    """The numpy reference against formulas written out here, on a 2-token, 2-head case."""
    m = Model("ref", (2, 4), seed=0)
    norm = m.layer_norm(m.input, name="norm")
    m.output(norm, m.gelu(m.input), m.softmax(m.input), m.attention(m.input, m.input, m.input, 2))
    x = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -3.0, 0.25]], np.float32)
    ln, gelu, soft, att = m.reference([x])
    gamma, beta = m.layers[0].weights()
    assert beta is not None and not np.allclose(gamma, 1.0)
    mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    np.testing.assert_allclose(ln, (x - mean) / np.sqrt(var + 1e-5) * gamma + beta, rtol=1e-5)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(gelu, 0.5 * x * (1 + erf(x / math.sqrt(2))), rtol=1e-6)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    head0 = x[:, :2]  # head 0 sees features 0-1 only: q = k = v
    weights = np.exp(head0 @ head0.T / math.sqrt(2))
    weights /= weights.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(att[:, :2], weights @ head0, rtol=1e-5)


def _ops_by_layer(text: str) -> dict[str, list[str]]:
    by_layer: dict[str, list[str]] = {}
    with ir.Context():
        module = ir.Module.parse(text)
        body = module.body.operations[0].regions[0].blocks[0]
        for op in body.operations:
            if "tdsched.layer" in op.attributes:
                layer = ir.StringAttr(op.attributes["tdsched.layer"]).value
                by_layer.setdefault(layer, []).append(op.name)
    return by_layer


def test_the_layers_lower_as_a_frontend_would() -> None:
    ops = _ops_by_layer(_small_encoder().to_linalg())
    attention = ops["attn"]
    assert attention.count("linalg.batch_matmul") == 2 and attention.count("linalg.softmax") == 1
    assert attention.count("linalg.transpose") == 4  # q, k, v heads first; the output back
    assert attention.count("tensor.expand_shape") == 3
    assert attention.count("tensor.collapse_shape") == 1
    # the row sum, the sum of squared deviations, the normalization: row_norm's layernorm
    assert ops["attn.norm"].count("linalg.generic") == 3
    assert ops["ffn.gelu"] == ["tensor.empty", "linalg.generic"]
    text = _small_encoder().to_linalg()
    assert text.count("math.erf") == 1 and text.count("math.sqrt") == 2
    assert text.count('iterator_types = ["parallel", "reduction"]') == 4  # two norms' sums


def test_the_onnx_export_matches_the_reference() -> None:
    import onnxruntime
    from onnx.reference import ReferenceEvaluator

    m = _small_encoder()
    proto = m.to_onnx()
    types = [n.op_type for n in proto.graph.node]
    assert types.count("LayerNormalization") == 2 and types.count("Erf") == 1
    assert types.count("Softmax") == 1 and types.count("MatMul") == 2
    names = {n.name for n in proto.graph.node}
    assert {"attn/scores", "attn/softmax", "ffn.gelu/erf", "attn.norm"} <= names
    x = _inputs(m)
    (want,) = m.reference(x)
    (evaluated,) = ReferenceEvaluator(proto).run(None, {"input": x[0]})
    np.testing.assert_allclose(evaluated, want, atol=1e-5, rtol=1e-5)
    session = onnxruntime.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(session.run(None, {"input": x[0]})[0], want, atol=1e-5, rtol=1e-5)


def test_the_encoder_layer_is_a_shipped_model_with_bert_base_defaults() -> None:
    m = MODELS["encoder_layer"]()
    assert m.input.shape == (128, 768) and m.outputs[0].shape == (128, 768)
    by_name = {layer.name: layer for layer in m.layers}
    assert by_name["attn"].heads == 12 and by_name["attn"].params == {"heads": 12}
    assert by_name["ffn.up"].output_shape == (128, 3072)
    assert by_name["attn.norm"].params == {"weight": [768], "bias": True, "epsilon": 1e-5}


def _error(make: Callable[[], object]) -> str:
    with pytest.raises(ModelError) as raised:
        make()
    return str(raised.value)


IMAGE = Model("image", (1, 3, 8, 8))


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda m: m.layer_norm(IMAGE.input), "belongs to model 'image'"),
        (lambda m: m.layer_norm(m.input, epsilon=0), "epsilon must be a number > 0, got 0"),
        (lambda m: m.layer_norm(m.input, epsilon=True), "epsilon must be a number > 0"),
        (lambda m: m.softmax(m.gelu(m.input, name="g"), name="g"), "a layer with this name"),
        (lambda m: m.attention(m.input, m.input, m.input, heads=5), "heads must be an int >= 1 "),
        (
            lambda m: m.attention(m.input, m.linear(m.input, 8), m.input),
            "attention needs k and v of one shape [T, 12]",
        ),
    ],
)
def test_bad_layers_are_refused_naming_the_layer_and_the_fix(
    make: Callable[[Model], object], expected: str
) -> None:
    m = Model("net", (4, 12))
    assert expected in _error(lambda: make(m))


def test_a_transformer_layer_on_an_image_names_the_rank_it_needs() -> None:
    message = _error(lambda: IMAGE.layer_norm(IMAGE.input, name="ln"))
    assert "layer 'ln': needs a rank-2 input [N, features]" in message
    assert "got [1, 3, 8, 8]" in message
    assert "test_transformer_layers.py" in message  # the user's line
