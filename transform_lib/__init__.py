"""Primitives that emit transform-dialect IR with the MLIR Python bindings."""
