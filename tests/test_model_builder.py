"""The Python model builder: each layer's lowering compiled by IREE against the numpy
reference, the lowered IR's structure and layer attributes, the shipped small_cnn on x86 and
Vulkan, ONNX export, and the error messages."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from iree.compiler import ir
from iree_numerics import run_module
from tdsched.recipes.models import MODELS, Model, ModelError, small_cnn
from tdsched.recipes.models.graph import RESERVED_ATTRS
from tdsched.targets.workload import random_inputs

HOT = {"hot": True, "tile": 8, "scale": 0.5, "tag": "stem"}


def _inputs(model: Model, shift: float = 0.0) -> list[np.ndarray]:
    x = np.random.default_rng(1).uniform(-1.0, 1.0, size=model.input.shape) + shift
    return [x.astype(np.float32)]


def _check_on(model: Model, target: str = "x86", shift: float = 0.0) -> list[np.ndarray]:
    """Compile the lowered model with IREE, run it and compare with ``model.reference``."""
    inputs = _inputs(model, shift)
    got = run_module(model.to_linalg(), model.name, inputs, target)
    want = model.reference(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, atol=1e-4 * scale, rtol=1e-4)
    return want


def _image(layout: str, c: int, h: int, w: int) -> tuple[int, int, int, int]:
    return (1, c, h, w) if layout == "NCHW" else (1, h, w, c)


def _top_level_ops(module: ir.Module) -> list[ir.Operation]:
    """The ops in the body of the module's only function (keep ``module`` alive meanwhile)."""
    entry = module.body.operations[0]
    return [op.operation for op in entry.regions[0].blocks[0].operations]


def _constant_value(value: ir.Value) -> float:
    return float(ir.FloatAttr(value.owner.attributes["value"]).value)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.usefixtures("iree")
def test_conv_stride_dilation_asymmetric_padding_matches_reference(layout: str) -> None:
    m = Model("conv", _image(layout, 3, 11, 10), layout=layout)
    y = m.conv2d(m.input, 5, kernel=(3, 2), stride=2, padding=(1, 0, 2, 1), dilation=2)
    z = m.conv2d(m.input, 4, kernel=1, bias=False)
    m.output(y, z)
    assert [list(t.shape) for t in m.outputs] == [
        list(_image(layout, 5, 5, 5)),
        list(_image(layout, 4, 11, 10)),
    ]
    _check_on(m)


def _grouped_model(layout: str) -> Model:
    """A depthwise 3x3 conv (one filter per channel), a depthwise conv with a channel
    multiplier of 2, and a strided conv of 2 groups."""
    m = Model("grouped", _image(layout, 4, 9, 8), layout=layout)
    depthwise = m.conv2d(m.input, 4, kernel=3, padding=1, groups=4, name="dw")
    doubled = m.conv2d(depthwise, 8, kernel=3, padding=1, groups=4, bias=False, name="dw2")
    m.output(m.conv2d(doubled, 6, kernel=(3, 2), stride=2, padding=1, groups=2, name="g2"))
    return m


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.usefixtures("iree")
def test_grouped_and_depthwise_convs_match_reference(layout: str) -> None:
    m = _grouped_model(layout)
    assert [layer.weight.shape for layer in m.layers if layer.weight is not None] == [
        (4, 1, 3, 3),
        (8, 1, 3, 3),
        (6, 4, 3, 2),
    ]
    text = m.to_linalg()
    # NCHW's depthwise conv is a grouped one: IREE builds depthwise_conv_2d_nchw_chw wrong
    # for Vulkan.
    depthwise = {"NCHW": 0, "NHWC": 1}[layout]
    grouped = "conv_2d_ngchw_gfchw" if layout == "NCHW" else "conv_2d_nhwgc_gfhwc"
    assert text.count("linalg.depthwise_conv_2d_nhwc_hwc") == depthwise
    assert text.count(f"linalg.{grouped}") == 3 - depthwise
    _check_on(m)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_grouped_convs_match_reference_on_vulkan(vulkan: None, layout: str) -> None:
    _check_on(_grouped_model(layout), target="vulkan")


def test_grouped_convs_export_to_onnx_with_their_groups() -> None:
    from onnx.reference import ReferenceEvaluator

    m = _grouped_model("NCHW")
    proto = m.to_onnx()
    groups = [a.i for n in proto.graph.node for a in n.attribute if a.name == "group"]
    assert groups == [4, 4, 2]
    x = _inputs(m)
    (got,) = ReferenceEvaluator(proto).run(None, {"input": x[0]})
    np.testing.assert_allclose(got, m.reference(x)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.usefixtures("iree")
def test_max_pool_pads_with_minus_infinity() -> None:
    """All inputs negative: a zero padding would win the max at the borders."""
    m = Model("maxpool", (1, 2, 7, 6))
    m.output(m.max_pool(m.input, 3, stride=2, padding=(1, 1, 1, 0)))
    want = _check_on(m, shift=-10.0)
    assert (want[0] < -8.0).all()
    with ir.Context():
        module = ir.Module.parse(m.to_linalg())
        ops = _top_level_ops(module)
        pad = next(op for op in ops if op.name == "tensor.pad")
        fill = next(op for op in ops if op.name == "linalg.fill")
        yielded = pad.regions[0].blocks[0].operations[0].operands[0]
        assert _constant_value(yielded) == _constant_value(fill.operands[0]) == float("-inf")
        assert [op.name for op in ops].count("linalg.pooling_nchw_max") == 1


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.usefixtures("iree")
def test_avg_pool_count_include_pad(count_include_pad: bool) -> None:
    m = Model("avgpool", (1, 5, 5, 2), layout="NHWC")
    m.output(m.avg_pool(m.input, 3, stride=1, padding=1, count_include_pad=count_include_pad))
    _check_on(m)
    ones = m.reference([np.ones(m.input.shape, np.float32)])[0]
    assert ones[0, 0, 0, 0] == pytest.approx(4 / 9 if count_include_pad else 1.0)
    assert ones[0, 2, 2, 0] == pytest.approx(1.0)
    with ir.Context():
        module = ir.Module.parse(m.to_linalg())
        ops = _top_level_ops(module)
        names = [op.name for op in ops]
        counts = [
            np.array(ir.DenseElementsAttr(op.attributes["value"]))
            for op in ops
            if op.name == "arith.constant" and isinstance(op.result.type, ir.RankedTensorType)
        ]
    assert names.count("linalg.pooling_nhwc_sum") == 1
    # Excluding padding divides by the count of in-bounds window elements per [OH, OW].
    edge = np.array([2.0, 3.0, 3.0, 3.0, 2.0])
    expected = [] if count_include_pad else [np.outer(edge, edge)]
    assert [c.tolist() for c in counts] == [e.tolist() for e in expected]


@pytest.mark.usefixtures("iree")
def test_flatten_linear_adaptive_pool_relu_add_nhwc() -> None:
    """NHWC flatten keeps the H, W, C element order; linear is x @ W.T + b."""
    m = Model("head", (2, 4, 6, 3), layout="NHWC")
    g = m.adaptive_avg_pool(m.input, (2, 3))
    f = m.flatten(g)
    a = m.relu(m.linear(f, 5))
    b = m.linear(f, 5, bias=False)
    m.output(m.add(a, b), f)
    assert f.shape == (2, 18)
    x = _inputs(m)[0]
    pooled = x.astype(np.float64).reshape(2, 2, 2, 3, 2, 3).mean(axis=(2, 4))
    np.testing.assert_allclose(m.reference([x])[1], pooled.reshape(2, 18), rtol=1e-6)
    _check_on(m)


def test_lowering_structure() -> None:
    m = Model("structure", (1, 6, 6, 3), layout="NHWC")
    y = m.conv2d(m.input, 4, kernel=3, padding=1, name="padded")
    y = m.conv2d(y, 4, kernel=3, name="unpadded")
    m.output(m.linear(m.flatten(y), 7, name="fc"))
    text = m.to_linalg()
    with ir.Context():
        module = ir.Module.parse(text)
        ops = _top_level_ops(module)
        by_layer: dict[str, list[str]] = {}
        for op in ops[:-1]:
            if "tdsched.layer" in op.attributes:
                layer = ir.StringAttr(op.attributes["tdsched.layer"]).value
                by_layer.setdefault(layer, []).append(op.name)
        assert by_layer["padded"].count("tensor.pad") == 1
        assert "tensor.pad" not in by_layer["unpadded"]
        assert by_layer["fc"].count("linalg.matmul") == 1
        assert "linalg.transpose" not in by_layer["fc"]
        pad = next(op for op in ops if op.name == "tensor.pad")
        assert _constant_value(pad.regions[0].blocks[0].operations[0].operands[0]) == 0.0
        convs = [op for op in ops if op.name == "linalg.conv_2d_nhwc_hwcf"]
        assert [list(ir.RankedTensorType(c.operands[1].type).shape) for c in convs] == [
            [3, 3, 3, 4],
            [3, 3, 4, 4],
        ]
        matmul = next(op for op in ops if op.name == "linalg.matmul")
        assert list(ir.RankedTensorType(matmul.operands[1].type).shape) == [7, 64]
        assert str(matmul.attributes["indexing_maps"]) == (
            "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
            "affine_map<(d0, d1, d2) -> (d0, d1)>]"
        )
        assert [op.name for op in ops].count("tensor.collapse_shape") == 1
    assert "util.func" not in text and "hal." not in text


def test_every_op_of_a_layer_carries_its_attributes_and_location() -> None:
    m = small_cnn(size=8, channels=4)
    hot = Model("hot", (1, 3, 6, 6))
    hot.output(hot.avg_pool(hot.conv2d(hot.input, 2, name="stem", attrs=HOT), 3, padding=1))
    for model in (m, hot):
        layers = {layer.name: layer for layer in model.layers}
        seen: set[str] = set()
        with ir.Context():
            module = ir.Module.parse(model.to_linalg())
            for op in _top_level_ops(module)[:-1]:
                location = str(op.location)
                name = location.removeprefix('loc("').removesuffix('")')
                assert name in layers, location
                attrs = {key: op.attributes[key] for key in op.attributes}
                if op.name == "arith.constant" and "tdsched.layer" not in attrs:
                    shape = tuple(ir.RankedTensorType(op.result.type).shape)
                    assert shape in {a.shape for a in layers[name].weights() if a is not None}
                    continue
                seen.add(name)
                assert ir.StringAttr(attrs["tdsched.layer"]).value == name
                assert ir.StringAttr(attrs["tdsched.layer_type"]).value == layers[name].type
                # Dotted names are dialect attributes (tdsched.*, linalg.memoized_indexing_maps).
                user = {key for key in attrs if "." not in key} - RESERVED_ATTRS
                if model is hot and name == "stem":
                    assert user == set(HOT)
                    assert ir.BoolAttr(attrs["hot"]).value is True
                    assert str(attrs["tile"]) == "8 : i64"
                    assert str(attrs["scale"]) == "5.000000e-01 : f64"
                    assert ir.StringAttr(attrs["tag"]).value == "stem"
                else:
                    assert user == set(), (op.name, user)
        assert seen == set(layers)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.usefixtures("iree")
def test_small_cnn_matches_reference_on_x86(layout: str) -> None:
    m = MODELS["small_cnn"](layout=layout, size=16, channels=8)
    assert m.input.shape == _image(layout, 3, 16, 16)
    assert [layer.name for layer in m.layers][:3] == ["stem", "stem.relu", "pool"]
    assert m.layers[-1].output_shape == (1, 10)
    want = _check_on(m)
    assert 0.1 < float(np.abs(want[0]).max()) < 100.0  # He scaling keeps activations O(1)


def test_small_cnn_matches_reference_on_vulkan(vulkan: None) -> None:
    _check_on(small_cnn(size=16, channels=8), target="vulkan")


def test_onnx_export() -> None:
    import onnx
    from onnx.reference import ReferenceEvaluator

    m = small_cnn(size=8, channels=4)
    proto = m.to_onnx()
    onnx.checker.check_model(proto)
    assert proto.opset_import[0].version == 17
    nodes = {n.name: n for n in proto.graph.node}
    assert [n.name for n in proto.graph.node] == [layer.name for layer in m.layers]
    assert [nodes[k].op_type for k in ("stem", "pool", "block1.add", "gap", "flatten", "fc")] == [
        "Conv",
        "MaxPool",
        "Add",
        "GlobalAveragePool",
        "Flatten",
        "Gemm",
    ]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes["block2.conv1"].attribute}
    assert attrs["pads"] == [1, 1, 1, 1] and attrs["strides"] == [2, 2]
    assert {a.name: a.i for a in nodes["fc"].attribute} == {"transB": 1}
    assert list(nodes["fc"].input)[1:] == ["fc.weight", "fc.bias"]
    assert [i.name for i in proto.graph.input] == ["input"]
    assert [o.name for o in proto.graph.output] == ["output"]

    pools = Model("pools", (1, 2, 5, 5))
    a = pools.avg_pool(pools.input, 3, padding=(1, 0, 1, 2), count_include_pad=False, name="a")
    pools.output(a, pools.max_pool(pools.input, 2, stride=1, padding=1, name="m"))
    proto = pools.to_onnx()
    assert [o.name for o in proto.graph.output] == ["output_0", "output_1"]
    assert {a.name: a.i for a in proto.graph.node[0].attribute}["count_include_pad"] == 0
    for model, p in ((m, m.to_onnx()), (pools, proto)):
        x = _inputs(model, shift=-3.0)
        for got, want in zip(
            ReferenceEvaluator(p).run(None, {"input": x[0]}), model.reference(x), strict=True
        ):
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_onnx_export_needs_nchw_and_the_onnx_package(monkeypatch: pytest.MonkeyPatch) -> None:
    nhwc = small_cnn(layout="NHWC", size=8)
    assert "ONNX export needs layout='NCHW'" in _error(nhwc.to_onnx)
    monkeypatch.setitem(sys.modules, "onnx", None)
    message = _error(small_cnn(size=8).to_onnx)
    assert message.endswith("exporting to ONNX needs the onnx package: pip install 'tdsched[onnx]'")


def _error(make: Callable[[], object]) -> str:
    """The ModelError ``make()`` raises, checked to start with this file's line of the call."""
    with pytest.raises(ModelError) as info:
        make()
    here = [entry for entry in info.traceback if Path(entry.path) == Path(__file__)][-1]
    site = f"{os.path.relpath(__file__)}:{here.lineno + 1}: "
    message = str(info.value)
    assert message.startswith(site), (message, site)
    return message.removeprefix(site)


def test_error_names_the_line_the_layer_and_the_fix() -> None:
    m = Model("net", (1, 3, 8, 8))
    a = m.conv2d(m.input, 16, padding=1, name="block1.conv1")
    b = m.conv2d(m.input, 32, padding=1)
    message = _error(lambda: m.add(a, b, name="block1.add"))
    assert message.startswith(
        "layer 'block1.add': add needs equal shapes, got [1, 16, 8, 8] and [1, 32, 8, 8]; "
        "match them first"
    )
    assert [layer.name for layer in m.layers] == ["block1.conv1", "conv2d_1"]


OTHER = Model("other", (1, 3, 8, 8))
BAD: list[tuple[Callable[[Model], object], str]] = [
    (lambda m: m.conv2d(m.input, 4, kernel=0), "kernel must be an int or a pair (h, w) of ints"),
    (lambda m: m.conv2d(m.input, 4, padding=(1, 2, 3)), "padding must be an int, a pair (h, w)"),
    (lambda m: m.conv2d(m.input, 4, kernel=9), "output size 0x0 < 1"),
    (
        lambda m: m.conv2d(m.input, 4, groups=2),
        "groups must be an int >= 1 that divides both the input channels (3) and "
        "out_channels (4), got 2",
    ),
    (lambda m: m.conv2d(OTHER.input, 4), "belongs to model 'other', not 'net'"),
    (lambda m: m.max_pool(m.input, 2, padding=2), "must be smaller than the kernel"),
    (lambda m: m.avg_pool(m.input, 2, ceil_mode=True), "ceil_mode is not supported"),
    (lambda m: m.adaptive_avg_pool(m.input, 3), "divisible by output_size (3x3)"),
    (
        lambda m: m.linear(m.input, 10),
        "linear needs a rank-2 input [N, features], got [1, 3, 8, 8]",
    ),
    (lambda m: m.flatten(m.linear(m.flatten(m.input), 4)), "needs a rank-4 image in NCHW order"),
    (lambda m: m.relu(m.relu(m.input, name="r"), name="r"), "layer 'r': a layer with this name"),
    (lambda m: m.relu(m.input, name="1st"), "layer names must match"),
    (lambda m: m.relu(m.input, name="output"), "reserved for ONNX export"),
    (lambda m: m.relu(m.input, attrs={"strides": 1}), "attribute name 'strides' must match"),
    (lambda m: m.relu(m.input, attrs={"hot": None}), "values must be str, bool, float or an int"),
    (lambda m: m.output(m.input), "the model input cannot be an output"),
    (lambda m: m.to_linalg(), "model 'net': has no output; call model.output(tensor) first"),
    (lambda m: Model("net", (1, 3, 8, 8), layout="NCWH"), "unknown layout 'NCWH'; use"),
    (lambda m: Model("net.v2", (1, 3, 8, 8)), "model names are MLIR symbols"),
    (lambda m: Model("net", (1, 3, 8, 8), dtype="f16"), "models are f32 only"),
    (lambda m: Model("net", (3, 8, 8)), "input_shape must be 4 positive ints"),
]


@pytest.mark.parametrize(("make", "expected"), BAD, ids=[text for _, text in BAD])
def test_invalid_models_are_rejected_eagerly(
    make: Callable[[Model], object], expected: str
) -> None:
    m = Model("net", (1, 3, 8, 8))
    assert expected in _error(lambda: make(m))


def test_layer_records_names_seeds_and_workload() -> None:
    m = Model("net", (1, 3, 8, 8), seed=3)
    m.relu(m.input, name="relu_1")
    r0, r2 = m.relu(m.input), m.relu(m.input)
    c = m.conv2d(r0, 4, kernel=(3, 1), padding=(1, 0), attrs={"hot": True})
    m.output(c)
    # <type>_<index among layers of that type>, skipping names already taken.
    assert [r0.source, r2.source, c.source] == ["relu_2", "relu_3", "conv2d_0"]
    layer = m.layers[-1]
    assert layer.type == "conv2d" and layer.input_shapes == [(1, 3, 8, 8)]
    assert layer.output_shape == (1, 4, 8, 8) and layer.attrs == {"hot": True}
    assert layer.params["padding"] == (1, 0, 1, 0) and layer.params["weight"] == [4, 3, 3, 1]

    def weight(seed: int) -> np.ndarray:
        model = Model("net", (1, 3, 8, 8), seed=seed)
        model.conv2d(model.input, 4, kernel=(3, 1))
        w, _ = model.layers[0].weights()
        return w

    np.testing.assert_array_equal(weight(3), layer.weights()[0])
    assert not np.array_equal(weight(3), weight(4))
    workload = m.workload()
    assert (workload.name, workload.function) == ("net", "net")
    assert workload.mlir.startswith("#loc") and "func.func @net(" in workload.mlir
    assert workload.reference is not None
    assert [a.shape for a in random_inputs(workload)] == [m.input.shape]
    x = _inputs(m)
    np.testing.assert_array_equal(workload.reference(x)[0], m.reference(x)[0])
