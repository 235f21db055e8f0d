"""A released runtime device closes, and the next module on its driver opens a new one
(the test session releases Vulkan after each Vulkan test: tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tdsched.targets import make_target
from tdsched.targets.compiler import CompileRequest, run_compile
from tdsched.targets.runtime import LoadedModule, release_device

ADD = """
func.func @add(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %r = arith.addf %a, %b : tensor<64xf32>
  return %r : tensor<64xf32>
}
"""


def test_a_released_vulkan_device_is_reopened_for_the_next_module(
    vulkan: None, tmp_path: Path
) -> None:
    source = tmp_path / "add.mlir"
    source.write_text(ADD)
    request = CompileRequest(source, make_target("vulkan"), tmp_path / "add.vmfb")
    vmfb = run_compile(request).output
    a, b = np.arange(64, dtype=np.float32), np.ones(64, dtype=np.float32)
    first = LoadedModule(vmfb, "vulkan", "add")
    again = LoadedModule(vmfb, "vulkan", "add")
    assert again._device is first._device  # one device per driver while it is held
    release_device("vulkan")
    reopened = LoadedModule(vmfb, "vulkan", "add")
    assert reopened._device is not first._device
    for module in (first, reopened):
        np.testing.assert_array_equal(module.invoke([a, b])[0], a + b)
