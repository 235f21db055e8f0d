"""Generated transformer layers: row normalization (layernorm, rmsnorm), batch matmul and
an attention block, as a frontend lowers them to linalg on tensors, with numpy references
computed in float64."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from tdsched.targets.workload import Workload, WorkloadError

from .generators import _Arguments, _check

NORMS = ("layernorm", "rmsnorm")
"""The row normalizations :func:`row_norm` builds."""

EPSILON = 1e-5
"""The epsilon added to the variance (layernorm) or the mean square (rmsnorm) before the
square root, as PyTorch's and ONNX's defaults."""

_ROW_MAPS = """#id = affine_map<(d0, d1) -> (d0, d1)>
#rowred = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
"""


def row_norm(M: int, N: int, norm: str = "layernorm", dtype: str = "f32") -> Workload:
    """Normalize each of M rows of N values, then scale by ``gamma`` (and, for
    layernorm, shift by ``beta``), both of length N, as a transformer's norm layers do.

    ``layernorm``: ``(x - mean) / sqrt(var + eps) * gamma + beta``, as three generics:
    the row sum, the row sum of squared deviations from the mean, and the normalization
    (mean and variance computed inside it from the sums). ``rmsnorm``:
    ``x / sqrt(mean(x²) + eps) * gamma``, as two: the row sum of squares and the
    normalization. eps is 1e-5.
    """
    _check("row_norm", dtype, M=M, N=N)
    if norm not in NORMS:
        raise WorkloadError(f"row_norm: norm must be one of {NORMS}, got {norm!r}")
    t = dtype
    shapes = {"x": (M, N), "gamma": (N,)} | ({"beta": (N,)} if norm == "layernorm" else {})
    args = _Arguments.of("row_norm", "input", t, shapes, set())
    mat, row = f"tensor<{M}x{N}x{t}>", f"tensor<{M}x{t}>"
    head = f"""{_ROW_MAPS}{args.header(mat)}  %zero = arith.constant 0.0 : {t}
  %n = arith.constant {float(N):.1f} : {t}
  %eps = arith.constant {EPSILON:.9e} : {t}
  %er = tensor.empty() : {row}
  %fr = linalg.fill ins(%zero : {t}) outs(%er : {row}) -> {row}
  %e = tensor.empty() : {mat}
"""

    def row_sum(name: str, mean: bool, body: str, value: str) -> str:
        """``%name[i] = sum_j value``: ``body`` computes ``value`` from ``%a`` = x[i, j]
        (and ``%sm`` = the row sum ``%sum[i]`` where ``mean``)."""
        maps, ins, arg = (
            ("#rowred, ", f", %sum : {mat}, {row}", f"%sm: {t}, ")
            if mean
            else ("", f" : {mat}", "")
        )
        return f"""  %{name} = linalg.generic {{indexing_maps = [#id, {maps}#rowred], iterator_types = ["parallel", "reduction"]}}
      ins(%x{ins}) outs(%fr : {row}) {{
  ^bb0(%a: {t}, {arg}%acc: {t}):{body}
    %s = arith.addf {value}, %acc : {t}
    linalg.yield %s : {t}
  }} -> {row}
"""

    if norm == "layernorm":
        deviation = (
            f"\n    %m = arith.divf %sm, %n : {t}\n    %d = arith.subf %a, %m : {t}\n"
            f"    %v = arith.mulf %d, %d : {t}"
        )
        sums = row_sum("sum", False, "", "%a") + row_sum("sq", True, deviation, "%v")
        normalize = f"""  %y = linalg.generic {{indexing_maps = [#id, #rowred, #rowred, #col, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %sum, %sq, %gamma, %beta : {mat}, {row}, {row}, tensor<{N}x{t}>, tensor<{N}x{t}>) outs(%e : {mat}) {{
  ^bb0(%a: {t}, %sm: {t}, %v: {t}, %g: {t}, %b: {t}, %o: {t}):
    %m = arith.divf %sm, %n : {t}
    %d = arith.subf %a, %m : {t}
    %var = arith.divf %v, %n : {t}
    %ve = arith.addf %var, %eps : {t}
    %sd = math.sqrt %ve : {t}
    %nrm = arith.divf %d, %sd : {t}
    %sc = arith.mulf %nrm, %g : {t}
    %r = arith.addf %sc, %b : {t}
    linalg.yield %r : {t}
  }} -> {mat}
"""
    else:
        sums = row_sum("sq", False, f"\n    %v = arith.mulf %a, %a : {t}", "%v")
        normalize = f"""  %y = linalg.generic {{indexing_maps = [#id, #rowred, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%x, %sq, %gamma : {mat}, {row}, tensor<{N}x{t}>) outs(%e : {mat}) {{
  ^bb0(%a: {t}, %v: {t}, %g: {t}, %o: {t}):
    %ms = arith.divf %v, %n : {t}
    %me = arith.addf %ms, %eps : {t}
    %rms = math.sqrt %me : {t}
    %nrm = arith.divf %a, %rms : {t}
    %r = arith.mulf %nrm, %g : {t}
    linalg.yield %r : {t}
  }} -> {mat}
"""
    mlir = f"{head}{sums}{normalize}  return %y : {mat}\n}}\n"

    def reference(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, gamma, *beta = (a.astype(np.float64) for a in arrays)
        if norm == "layernorm":
            centred = x - x.mean(axis=1, keepdims=True)
            y = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + EPSILON)
            y = y * gamma + beta[0]
        else:
            y = x / np.sqrt((x**2).mean(axis=1, keepdims=True) + EPSILON) * gamma
        return [y.astype(arrays[0].dtype)]

    return args.workload(f"{norm}_{M}x{N}_{t}", mlir, reference, None)


def batch_matmul(B: int, M: int, N: int, K: int, dtype: str = "f32") -> Workload:
    """C[b] = A[b] @ B[b] for each of B batches (fill + ``linalg.batch_matmul``), A:
    BxMxK, B: BxKxN: a transformer's per-head matmuls, a grouped projection."""
    _check("batch_matmul", dtype, B=B, M=M, N=N, K=K)
    t = dtype
    args = _Arguments.of("batch_matmul", "input", t, {"a": (B, M, K), "b": (B, K, N)}, set())
    out = f"tensor<{B}x{M}x{N}x{t}>"
    mlir = f"""{args.header(out)}  %zero = arith.constant 0.0 : {t}
  %empty = tensor.empty() : {out}
  %init = linalg.fill ins(%zero : {t}) outs(%empty : {out}) -> {out}
  %c = linalg.batch_matmul ins(%a, %b : {args.type("a")}, {args.type("b")}) outs(%init : {out}) -> {out}
  return %c : {out}
}}
"""

    def reference(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = arrays
        return [np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)]

    def peer(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = arrays
        return [np.matmul(a, b)]

    return args.workload(f"{B}x{M}x{N}x{K}_{t}", mlir, reference, peer)


def attention(H: int, S: int, D: int, dtype: str = "f32") -> Workload:
    """Scaled dot-product attention of H heads: ``softmax(Q Kᵀ / sqrt(D)) V`` with Q, K
    and V each HxSxD (S tokens, head dimension D), as a frontend lowers it: a batch
    matmul with K transposed, the scaling (a generic), ``linalg.softmax`` over the keys,
    a batch matmul with V. The SxS scores of every head pass through memory between
    the ops unless a schedule fuses them."""
    _check("attention", dtype, H=H, S=S, D=D)
    t = dtype
    args = _Arguments.of(
        "attention", "input", t, {"q": (H, S, D), "k": (H, S, D), "v": (H, S, D)}, set()
    )
    qkv, scores = args.type("q"), f"tensor<{H}x{S}x{S}x{t}>"
    mlir = f"""#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
{args.header(qkv)}  %zero = arith.constant 0.0 : {t}
  %scale = arith.constant {1.0 / math.sqrt(D):.9e} : {t}
  %es = tensor.empty() : {scores}
  %fs = linalg.fill ins(%zero : {t}) outs(%es : {scores}) -> {scores}
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                            affine_map<(b, m, n, k) -> (b, n, k)>,
                                            affine_map<(b, m, n, k) -> (b, m, n)>]
      ins(%q, %k : {qkv}, {qkv}) outs(%fs : {scores}) -> {scores}
  %scaled = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%s : {scores}) outs(%es : {scores}) {{
  ^bb0(%a: {t}, %o: {t}):
    %r = arith.mulf %a, %scale : {t}
    linalg.yield %r : {t}
  }} -> {scores}
  %p = linalg.softmax dimension(2) ins(%scaled : {scores}) outs(%es : {scores}) -> {scores}
  %eo = tensor.empty() : {qkv}
  %fo = linalg.fill ins(%zero : {t}) outs(%eo : {qkv}) -> {qkv}
  %o = linalg.batch_matmul ins(%p, %v : {scores}, {qkv}) outs(%fo : {qkv}) -> {qkv}
  return %o : {qkv}
}}
"""

    def reference(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        q, k, v = (a.astype(np.float64) for a in arrays)
        s = np.matmul(q, k.transpose(0, 2, 1)) / math.sqrt(D)
        p = np.exp(s - s.max(axis=2, keepdims=True))
        p /= p.sum(axis=2, keepdims=True)
        return [np.matmul(p, v).astype(arrays[0].dtype)]

    def peer(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        q, k, v = arrays
        s = np.matmul(q, k.transpose(0, 2, 1))
        s *= 1 / math.sqrt(D)
        p = np.exp(s - s.max(axis=2, keepdims=True))
        p /= p.sum(axis=2, keepdims=True)
        return [np.matmul(p, v)]

    return args.workload(f"{H}x{S}x{D}_{t}", mlir, reference, peer)
