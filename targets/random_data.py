"""Seeded random arrays, the inputs every check and timing uses: numpy alone, so a
machine that only runs modules (``iree.runtime``, no compiler) draws the same inputs as
the one that built them (``benchmarks/vulkan_gpu.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NUMPY_DTYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "f64": np.float64,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
}
"""numpy's dtype for each MLIR element type an entry function may take."""


def random_arrays(types: Sequence[tuple[Sequence[int], str]], seed: int) -> list[np.ndarray]:
    """One array per ``(shape, MLIR element type)``, drawn in order from one generator
    seeded with ``seed``: floats uniform in [-1, 1), integers in [-8, 8).

    Precondition: every element type is a key of :data:`NUMPY_DTYPES`.
    """
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, elem in types:
        dtype = NUMPY_DTYPES[elem]
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype))
        else:
            arrays.append(rng.integers(-8, 8, size=tuple(shape)).astype(dtype))
    return arrays
