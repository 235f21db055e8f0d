"""Targets: compile through IREE for x86 (llvm-cpu) and Vulkan (vulkan-spirv), run, time."""

from .target import TARGET_NAMES, Target, make_target

__all__ = ["TARGET_NAMES", "Target", "make_target"]
