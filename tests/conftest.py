"""Shared fixtures. Vulkan tests skip without a device unless TDSCHED_REQUIRE_VULKAN=1
(set by CI), where a missing device fails them instead."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tdsched.recipes import RECIPES_DIR
from tdsched.targets.runtime import driver_available

REQUIRE_VULKAN = os.environ.get("TDSCHED_REQUIRE_VULKAN") == "1"


FIRST = ("test_sweep_ray.py", "test_regress.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the Ray and the perf regression tests first. Once a process opens a Vulkan
    device on Mesa's lavapipe it keeps two cores busy for the rest of its life (measured:
    200% CPU while idle): Ray runs its workers niced, so after any in-process Vulkan test
    their compiles crawl past the Ray tests' time limits, and the regression tests' timing
    would share the machine with it."""
    items.sort(key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else 2)


@pytest.fixture(scope="session")
def vulkan() -> None:
    """Require a Vulkan device: skip without one, or fail when CI demands Vulkan."""
    if driver_available("vulkan"):
        return
    message = "no Vulkan device (install mesa-vulkan-drivers for lavapipe)"
    if REQUIRE_VULKAN:
        pytest.fail(message + "; TDSCHED_REQUIRE_VULKAN=1 makes this a failure")
    pytest.skip(message)


@pytest.fixture(scope="session")
def iree_opt() -> str:
    tool = shutil.which("iree-opt") or str(Path(os.sys.executable).parent / "iree-opt")
    assert Path(tool).exists(), "iree-opt not found next to the Python interpreter"
    return tool


@pytest.fixture(scope="session")
def recipes_dir() -> Path:
    return RECIPES_DIR
