"""Workloads: linalg-on-tensors modules with seeded inputs and a numpy reference."""

from .generators import GENERATORS, generate
from .model import Workload, load_mlir_file, random_inputs

__all__ = ["GENERATORS", "Workload", "generate", "load_mlir_file", "random_inputs"]
