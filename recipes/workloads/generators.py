"""Generated linalg-on-tensors workloads with numpy references.

Each generator returns a :class:`Workload` whose MLIR is the payload (linalg on tensors,
as a frontend would produce it) and whose reference computes the same function in numpy
(in float64 for floats, cast back, so the reference is the more accurate side).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .model import Workload, WorkloadError

_FLOAT_TYPES = ("f32", "f16", "f64")


def _check(name: str, dtype: str, **dims: int) -> None:
    if dtype not in _FLOAT_TYPES:
        raise WorkloadError(f"{name}: dtype {dtype!r} is not supported; use one of {_FLOAT_TYPES}")
    for dim, value in dims.items():
        if not isinstance(value, int) or value <= 0:
            raise WorkloadError(f"{name}: {dim} must be a positive integer, got {value!r}")


def matmul(M: int, N: int, K: int, dtype: str = "f32") -> Workload:
    """C = A @ B with A: MxK, B: KxN (fill + linalg.matmul)."""
    _check("matmul", dtype, M=M, N=N, K=K)
    t = dtype
    mlir = f"""func.func @matmul(%a: tensor<{M}x{K}x{t}>, %b: tensor<{K}x{N}x{t}>) -> tensor<{M}x{N}x{t}> {{
  %zero = arith.constant 0.0 : {t}
  %empty = tensor.empty() : tensor<{M}x{N}x{t}>
  %init = linalg.fill ins(%zero : {t}) outs(%empty : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  %c = linalg.matmul ins(%a, %b : tensor<{M}x{K}x{t}>, tensor<{K}x{N}x{t}>) outs(%init : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  return %c : tensor<{M}x{N}x{t}>
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = args
        return [(a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)]

    return Workload(f"matmul_{M}x{N}x{K}_{t}", mlir, "matmul", reference)


def matmul_bias_relu(M: int, N: int, K: int, dtype: str = "f32") -> Workload:
    """relu(A @ B + bias) with bias: N broadcast along rows, as one elementwise generic."""
    _check("matmul_bias_relu", dtype, M=M, N=N, K=K)
    t = dtype
    mlir = f"""#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @matmul_bias_relu(%a: tensor<{M}x{K}x{t}>, %b: tensor<{K}x{N}x{t}>, %bias: tensor<{N}x{t}>) -> tensor<{M}x{N}x{t}> {{
  %zero = arith.constant 0.0 : {t}
  %empty = tensor.empty() : tensor<{M}x{N}x{t}>
  %init = linalg.fill ins(%zero : {t}) outs(%empty : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  %mm = linalg.matmul ins(%a, %b : tensor<{M}x{K}x{t}>, tensor<{K}x{N}x{t}>) outs(%init : tensor<{M}x{N}x{t}>) -> tensor<{M}x{N}x{t}>
  %out = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%mm, %bias : tensor<{M}x{N}x{t}>, tensor<{N}x{t}>) outs(%empty : tensor<{M}x{N}x{t}>) {{
  ^bb0(%x: {t}, %bv: {t}, %o: {t}):
    %s = arith.addf %x, %bv : {t}
    %r = arith.maximumf %s, %zero : {t}
    linalg.yield %r : {t}
  }} -> tensor<{M}x{N}x{t}>
  return %out : tensor<{M}x{N}x{t}>
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b, bias = args
        acc = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
        return [np.maximum(acc, 0.0).astype(a.dtype)]

    return Workload(f"matmul_bias_relu_{M}x{N}x{K}_{t}", mlir, "matmul_bias_relu", reference)


def conv2d_nhwc(
    N: int,
    H: int,
    W: int,
    C: int,
    F: int,
    KH: int = 3,
    KW: int = 3,
    pad: int = 1,
    dtype: str = "f32",
) -> Workload:
    """Stride-1 2-D convolution, NHWC input, HWCF filter, zero padding ``pad`` on H and W."""
    _check("conv2d_nhwc", dtype, N=N, H=H, W=W, C=C, F=F, KH=KH, KW=KW)
    if pad < 0:
        raise WorkloadError(f"conv2d_nhwc: pad must be >= 0, got {pad}")
    OH, OW = H + 2 * pad - KH + 1, W + 2 * pad - KW + 1
    if OH <= 0 or OW <= 0:
        raise WorkloadError("conv2d_nhwc: the filter is larger than the padded input")
    PH, PW = H + 2 * pad, W + 2 * pad
    t = dtype
    inp, flt, out = (
        f"tensor<{N}x{H}x{W}x{C}x{t}>",
        f"tensor<{KH}x{KW}x{C}x{F}x{t}>",
        f"tensor<{N}x{OH}x{OW}x{F}x{t}>",
    )
    mlir = f"""func.func @conv2d_nhwc(%x: {inp}, %w: {flt}) -> {out} {{
  %zero = arith.constant 0.0 : {t}
  %padded = tensor.pad %x low[0, {pad}, {pad}, 0] high[0, {pad}, {pad}, 0] {{
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : {t}
  }} : {inp} to tensor<{N}x{PH}x{PW}x{C}x{t}>
  %empty = tensor.empty() : {out}
  %init = linalg.fill ins(%zero : {t}) outs(%empty : {out}) -> {out}
  %y = linalg.conv_2d_nhwc_hwcf {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
      ins(%padded, %w : tensor<{N}x{PH}x{PW}x{C}x{t}>, {flt}) outs(%init : {out}) -> {out}
  return %y : {out}
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, w = args
        xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        y = np.zeros((N, OH, OW, F))
        for kh in range(KH):
            for kw in range(KW):
                y += np.einsum("nhwc,cf->nhwf", xp[:, kh : kh + OH, kw : kw + OW, :], w[kh, kw])
        return [y.astype(x.dtype)]

    return Workload(f"conv2d_nhwc_{N}x{H}x{W}x{C}_{F}_{t}", mlir, "conv2d_nhwc", reference)


GENERATORS: dict[str, Callable[..., Workload]] = {
    "matmul": matmul,
    "matmul_bias_relu": matmul_bias_relu,
    "conv2d_nhwc": conv2d_nhwc,
}


def generate(name: str, args: dict[str, int | str]) -> Workload:
    """Build the generator ``name`` with keyword ``args``; errors say what is expected."""
    if name not in GENERATORS:
        raise WorkloadError(f"unknown generator {name!r}; available: {', '.join(GENERATORS)}")
    gen = GENERATORS[name]
    try:
        return gen(**args)
    except TypeError as exc:
        import inspect

        expected = ", ".join(inspect.signature(gen).parameters)
        raise WorkloadError(
            f"generator {name}: bad arguments {sorted(args)}; expected {expected}"
        ) from exc
