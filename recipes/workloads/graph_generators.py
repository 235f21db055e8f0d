"""Generated workloads for the graph rewrites (fuse_elementwise_ext, collapse_dims,
fuse_pad), with numpy references computed in float64."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tdsched.targets.workload import Workload

from .generators import _check, reduce_pad_conv, reduce_pad_conv_reference


def elementwise_chain(M: int = 4096, N: int = 4096, dtype: str = "f32") -> Workload:
    """A memory-bound elementwise graph: a chain of four ops plus a second branch.

    ``d = (max(x * scale[col] + bias[row], 0))²`` as four generics (a broadcast map
    ``(d0, d1) -> (d1)`` and a constant-result map ``(d0, d1) -> (d0, 0)`` among them), and
    ``e = |x|`` as a named ``linalg.elementwise`` reading the same ``x``. Returns ``(d, e)``.
    """
    _check("elementwise_chain", dtype, M=M, N=N)
    t = dtype
    mat = f"tensor<{M}x{N}x{t}>"

    def generic(name: str, ins: list[tuple[str, str, str]], body: str) -> str:
        maps = ", ".join([m for _, m, _ in ins] + ["#id"])
        args = ", ".join(f"%a{i}: {t}" for i in range(len(ins)))
        return (
            f"  %{name} = linalg.generic {{indexing_maps = [{maps}], iterator_types = "
            f'["parallel", "parallel"]}} ins({", ".join(v for v, _, _ in ins)} : '
            f"{', '.join(ty for _, _, ty in ins)}) outs(%e : {mat}) {{\n"
            f"  ^bb0({args}, %o: {t}):\n    {body.format(t=t)}\n  }} -> {mat}"
        )

    mlir = "\n".join(
        [
            "#id = affine_map<(d0, d1) -> (d0, d1)>",
            "#col = affine_map<(d0, d1) -> (d1)>",
            "#row = affine_map<(d0, d1) -> (d0, 0)>",
            f"func.func @elementwise_chain(%x: {mat}, %scale: tensor<{N}x{t}>, "
            f"%bias: tensor<{M}x1x{t}>) -> ({mat}, {mat}) {{",
            f"  %zero = arith.constant 0.0 : {t}",
            f"  %e = tensor.empty() : {mat}",
            generic(
                "a",
                [("%x", "#id", mat), ("%scale", "#col", f"tensor<{N}x{t}>")],
                "%v = arith.mulf %a0, %a1 : {t}\n    linalg.yield %v : {t}",
            ),
            generic(
                "b",
                [("%a", "#id", mat), ("%bias", "#row", f"tensor<{M}x1x{t}>")],
                "%v = arith.addf %a0, %a1 : {t}\n    linalg.yield %v : {t}",
            ),
            generic(
                "c",
                [("%b", "#id", mat)],
                "%v = arith.maximumf %a0, %zero : {t}\n    linalg.yield %v : {t}",
            ),
            generic(
                "d",
                [("%c", "#id", mat)],
                "%v = arith.mulf %a0, %a0 : {t}\n    linalg.yield %v : {t}",
            ),
            f"  %abs = linalg.elementwise <abs> ins(%x : {mat}) outs(%e : {mat}) -> {mat}",
            f"  return %d, %abs : {mat}, {mat}",
            "}",
            "",
        ]
    )

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, scale, bias = (a.astype(np.float64) for a in args)
        d = np.maximum(x * scale[None, :] + bias, 0.0) ** 2
        return [d.astype(args[0].dtype), np.abs(x).astype(args[0].dtype)]

    return Workload(f"elementwise_chain_{M}x{N}_{t}", mlir, "elementwise_chain", reference)


def channel_affine(
    N: int = 8, C: int = 64, H: int = 56, W: int = 56, dtype: str = "f32"
) -> Workload:
    """``max(x * s[c] + b[c], 0)`` on an NCHW tensor (per-channel broadcast operands):
    the loops (d2, d3) read contiguously by every operand collapse into one."""
    _check("channel_affine", dtype, N=N, C=C, H=H, W=W)
    t = dtype
    x_t, c_t = f"tensor<{N}x{C}x{H}x{W}x{t}>", f"tensor<{C}x{t}>"
    mlir = f"""#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d1)>
func.func @channel_affine(%x: {x_t}, %s: {c_t}, %b: {c_t}) -> {x_t} {{
  %zero = arith.constant 0.0 : {t}
  %e = tensor.empty() : {x_t}
  %y = linalg.generic {{indexing_maps = [#id, #chan, #chan, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%x, %s, %b : {x_t}, {c_t}, {c_t}) outs(%e : {x_t}) {{
  ^bb0(%v: {t}, %sv: {t}, %bv: {t}, %o: {t}):
    %m = arith.mulf %v, %sv : {t}
    %a = arith.addf %m, %bv : {t}
    %r = arith.maximumf %a, %zero : {t}
    linalg.yield %r : {t}
  }} -> {x_t}
  return %y : {x_t}
}}
"""

    def reference(args: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, s, b = (a.astype(np.float64) for a in args)
        y = np.maximum(x * s[None, :, None, None] + b[None, :, None, None], 0.0)
        return [y.astype(args[0].dtype)]

    return Workload(f"channel_affine_{N}x{C}x{H}x{W}_{t}", mlir, "channel_affine", reference)


def conv_pad_conv(
    N: int = 1, H: int = 56, W: int = 56, C: int = 64, M: int = 64, dtype: str = "f32"
) -> Workload:
    """1x1 conv C→M + bias + relu, zero pad 1 on H and W, 3x3 conv M→M (NHWC, HWCF):
    the padded activation between two layers of a ResNet bottleneck."""
    _check("conv_pad_conv", dtype, N=N, H=H, W=W, C=C, M=M)
    t = dtype
    x_t, mid_t = f"tensor<{N}x{H}x{W}x{C}x{t}>", f"tensor<{N}x{H}x{W}x{M}x{t}>"
    pad_t = f"tensor<{N}x{H + 2}x{W + 2}x{M}x{t}>"
    w1_t, w2_t, b_t = f"tensor<1x1x{C}x{M}x{t}>", f"tensor<3x3x{M}x{M}x{t}>", f"tensor<{M}x{t}>"
    body = [f"%zero = arith.constant 0.0 : {t}"]
    body += [f"%e_{n} = tensor.empty() : {mid_t}" for n in ("c1", "r1", "c2")]
    body += reduce_pad_conv(x_t, mid_t, pad_t, w1_t, w2_t, b_t, t)
    body.append(f"return %c2 : {mid_t}")
    mlir = (
        "#nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>\n"
        "#chan = affine_map<(d0, d1, d2, d3) -> (d3)>\n"
        f"func.func @conv_pad_conv(%x: {x_t}, %w1: {w1_t}, %b1: {b_t}, %w2: {w2_t}) -> {mid_t} "
        "{\n  " + "\n  ".join(body) + "\n}\n"
    )

    def reference(a: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, w1, b1, w2 = (v.astype(np.float64) for v in a)
        return [reduce_pad_conv_reference(x, w1, b1, w2).astype(a[0].dtype)]

    return Workload(f"conv_pad_conv_{N}x{H}x{W}x{C}_{M}_{t}", mlir, "conv_pad_conv", reference)
