"""Recipes on lowered models: workloads from the model builder, ONNX and TOSA, and ops
selected by layer name and attribute values, in graph and kernel schedules."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from cli_process import tdsched
from tdsched.schedules.base.errors import RecipeError
from tdsched.schedules.compile.pipeline import apply_graph, plan
from tdsched.schedules.dsl.params import resolve
from tdsched.schedules.dsl.recipe import Recipe
from tdsched.schedules.frontends.loading import load
from tdsched.schedules.frontends.recipe_trust import Trust
from tdsched.targets.target import DEFAULT_THREADS

NET = """
from tdsched.recipes.models import Model


def model(width=8):
    m = Model("net", input_shape=(1, 4, 8, 8), seed=1)
    x = m.conv2d(m.input, width, kernel=3, padding=1, name="c1", attrs={"hot": True})
    x = m.relu(x, name="c1.relu")
    y = m.conv2d(x, width, kernel=3, padding=1, name="c2")
    y = m.relu(y, name="c2.relu")
    m.output(m.flatten(m.add(x, y, name="sum"), name="flat"))
    return m


def broken():
    raise RuntimeError("no weights today")
"""


def trusted(path: Path) -> Recipe:
    """The recipe at ``path``, whose workload is the Python model file ``net.py``."""
    return load(str(path), Trust(python_workload=True))


def recipe(tmp_path: Path, body: str) -> Path:
    (tmp_path / "net.py").write_text(NET)
    path = tmp_path / "r.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_graph_rewrite_selects_ops_by_layer_pattern_and_attribute_value(tmp_path: Path) -> None:
    base = """\
        name: net_graph
        workload: {model: net.py:model}
        targets: [x86]
        graph:
          - fuse_elementwise_ext: {shared_input: false, ops: %s}
        """
    by_layer = plan(trusted(recipe(tmp_path, base % "{layer: 'c1*'}")))
    report = apply_graph(by_layer).reports[0]
    assert "fused 2 generics into 1" in report, report
    by_value = plan(trusted(recipe(tmp_path, base % "{attributes: {hot: true}}")))
    assert "fused" not in apply_graph(by_value).reports[0].split("\n")[0].split(":")[1]
    everything = apply_graph(plan(trusted(recipe(tmp_path, base % "{layer: '*'}")))).reports[0]
    assert "generics into" in everything and "fused 2 generics into 1" not in everything


def test_match_step_by_layer_is_exact_per_layer(tmp_path: Path) -> None:
    p = plan(
        trusted(
            recipe(
                tmp_path,
                """\
                name: net_match
                workload: {model: net.py:model}
                targets: [x86]
                graph:
                  - match: {op: linalg.conv_2d_nchw_fchw, layer: [c1, c2], as: convs}
                  - generalize: {target: convs}
                """,
            )
        )
    )
    module = apply_graph(p).module
    assert "linalg.conv_2d_nchw_fchw" not in module
    assert module.count('tdsched.layer = "c1"') >= 1


def test_unknown_layer_is_an_error_listing_the_layers(tmp_path: Path) -> None:
    path = recipe(
        tmp_path,
        """\
        name: net_bad
        workload: {model: net.py:model}
        targets: [x86]
        graph:
          - fuse_elementwise_ext: {ops: {layer: c3}}
        """,
    )
    with pytest.raises(RecipeError, match=r"r.yaml:5.*no layer matches 'c3'.*c1, c1.relu, c2"):
        plan(trusted(path))


KERNEL = """\
    name: net_kernel
    workload: {model: net.py:model}
    targets: [x86]
    kernels:
      - name: conv
        match: %s
        schedule:
          - tile: {sizes: [4, 0, 0, 0, 0, 0], loop: forall, mapping: workgroup}
    """


@pytest.mark.usefixtures("iree")
def test_kernel_match_by_layer_resolves_through_the_dispatch_census(tmp_path: Path) -> None:
    p = plan(trusted(recipe(tmp_path, KERNEL % "{layer: c2}")))
    (note,) = p.notes
    assert note.startswith("kernel 'conv': layer c2 -> linalg.generic with loop bounds")
    assert "[8, 8, 8, 8, 3, 3]" in note  # unit batch dropped: F, OH, OW, C, KH, KW
    kernel = p.recipe.kernels[0]
    assert kernel.match.layers == () and kernel.match.op == "linalg.generic"
    assert kernel.match.shape == (8, 8, 8, 8, 3, 3)
    by_value = plan(trusted(recipe(tmp_path, KERNEL % "{attributes: {hot: true}}")))
    assert by_value.notes[0].startswith("kernel 'conv': layer c1 -> ")


@pytest.mark.usefixtures("iree")
def test_a_kernel_match_by_layer_tells_a_lookalike_apart_by_the_op_using_its_result(
    tmp_path: Path,
) -> None:
    # c1 and c2 are convs of one shape (8 -> 8 channels): c1's result goes through its
    # bias and ReLU (an epilogue of 2 inputs), c2's through its bias, ReLU and the
    # residual add (3 inputs).
    same = NET.replace('"c1", attrs={"hot": True}', '"c1"').replace(
        "m.conv2d(m.input, width", "m.conv2d(m.conv2d(m.input, width, name='c0'), width"
    )
    path = recipe(tmp_path, KERNEL % "{layer: c2}")
    (tmp_path / "net.py").write_text(same)
    p = plan(trusted(path))
    match = p.recipe.kernels[0].match
    assert (match.op, match.shape) == ("linalg.generic", (8, 6, 6, 8, 3, 3))
    assert (match.used_by, match.used_by_inputs) == ("linalg.generic", 3)
    assert "told apart by used_by linalg.generic (3 inputs) in" in p.notes[0]


@pytest.mark.usefixtures("iree")
def test_kernel_match_by_one_of_two_lookalike_layers_is_refused(tmp_path: Path) -> None:
    # Two convs of one shape, each with its ReLU and stored: nothing tells them apart.
    twins = (
        NET.replace('"c1", attrs={"hot": True}', '"c1"')
        .replace("m.conv2d(m.input, width", "m.conv2d(m.conv2d(m.input, width, name='c0'), width")
        .replace('m.output(m.flatten(m.add(x, y, name="sum"), name="flat"))', "m.output(x, y)")
    )
    path = recipe(tmp_path, KERNEL % "{layer: c2}")
    (tmp_path / "net.py").write_text(twins)
    with pytest.raises(RecipeError, match=r"structure only.*c1.*would apply there too"):
        plan(trusted(path))


@pytest.mark.usefixtures("iree")  # the dispatch census compiles
def test_kernel_match_by_layers_of_different_shapes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"different ops.*one kernel schedule per shape"):
        plan(trusted(recipe(tmp_path, KERNEL % "{layer: 'c*'}")))


@pytest.mark.process
def test_model_file_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = recipe(
        tmp_path,
        """\
        name: net_broken
        workload: {model: net.py:broken}
        targets: [x86]
        """,
    )
    with pytest.raises(RecipeError, match=r"net.py:16: building failed: RuntimeError: no weights"):
        plan(trusted(path))
    proc = tdsched("show", str(path), "--allow-python-workload")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "net.py:16: building failed" in proc.stderr


@pytest.mark.process
def test_lower_cli_builder_onnx_tosa_and_layers(tmp_path: Path) -> None:
    layers = tdsched("lower", "small_cnn", "--layers")
    assert layers.returncode == 0, layers.stderr
    assert (
        "block2.proj" in layers.stdout
        and "linalg.conv_2d_nchw_fchw [1, 32, 8, 8, 16, 1, 1]" in layers.stdout
    )
    onnx = tdsched("lower", "small_cnn", "--via", "onnx", "--arg", "channels=8")
    assert onnx.returncode == 0, onnx.stderr
    assert 'tdsched.onnx_op = "Conv"' in onnx.stdout and "func.func @small_cnn" in onnx.stdout
    tosa = tmp_path / "t.mlir"
    tosa.write_text(
        "func.func @f(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
        '  %0 = "tosa.clamp"(%a) <{min_val = 0.0 : f32, max_val = 6.0 : f32}> '
        ": (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
        "  return %0 : tensor<2x3xf32>\n}\n"
    )
    lowered = tdsched("lower", str(tosa))
    assert (
        lowered.returncode == 0
        and "linalg.generic" in lowered.stdout
        and "tosa." not in lowered.stdout
    )
    bad = tdsched("lower", "small_cnn", "--arg", "layout=XY")
    assert bad.returncode == 2 and "layout" in bad.stderr and "Traceback" not in bad.stderr
    missing = tdsched("lower", str(tmp_path / "nope.onnx"))
    assert missing.returncode == 2 and "nope.onnx" in missing.stderr


@pytest.mark.parametrize("via", ["builder", "onnx"])
@pytest.mark.usefixtures("iree")
def test_small_cnn_recipe_on_x86_matches_numpy(via: str) -> None:
    proc = tdsched("run", "small_cnn_x86", "--param", f"VIA={via}", "--no-time", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"reference": "numpy"' in proc.stdout and '"status": "ok"' in proc.stdout


@pytest.mark.parametrize("via", ["builder", "onnx"])
def test_small_cnn_recipe_on_vulkan_matches_numpy(vulkan: None, via: str) -> None:
    proc = tdsched("run", "small_cnn_vulkan", "--param", f"VIA={via}", "--no-time", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"reference": "numpy"' in proc.stdout and '"status": "ok"' in proc.stdout


@pytest.mark.usefixtures("iree")
def test_small_cnn_schedule_applied_where_the_recipe_says() -> None:
    proc = tdsched("apply", "small_cnn_x86")
    assert proc.returncode == 0, proc.stderr
    resolved = "// kernel 'block1': layer block1.conv1, block1.conv2 -> linalg.generic"
    assert resolved in proc.stdout
    # The graph steps select by layer: only block2's 1x1 projection and conv1 change.
    assert "// im2col: rewrote 1 linalg.conv_2d_nchw_fchw into a gather" in proc.stdout
    assert "// conv1x1_to_matmul: rewrote 1 linalg.conv_2d_nchw_fchw" in proc.stdout
    block1 = proc.stdout.split("// kernel 'block1': dispatch function after its schedule steps")
    assert np.char.count(block1[1], "scf.forall").sum() >= 1
    # The conv is vectorized to its register tile (its unit loops folded), not left as a
    # scalar linalg op; the tile is the shape table's entry for the default shape.
    tile = resolve(load("small_cnn_x86"), threads=DEFAULT_THREADS).parameter_dict
    register = f"vector<{tile['RH']}x{tile['RW']}xf32>"
    assert register in block1[1] and "linalg.generic" not in block1[1]
