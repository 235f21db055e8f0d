"""Workloads: linalg-on-tensors modules with seeded inputs and a numpy reference."""

from .model import Workload, load_mlir_file, random_inputs
from .registry import GENERATORS, generate

__all__ = ["GENERATORS", "Workload", "generate", "load_mlir_file", "random_inputs"]
