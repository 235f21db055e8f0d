"""An FMA-throughput probe: the arithmetic peak a compute-bound workload is judged against.

One elementwise ``linalg.generic`` over a 1-D f32 domain that stays in the L2 cache. Its
body runs ``chains`` independent chains of ``LENGTH`` fused multiply-adds each
(``y = y * 0.999 + 0.001``, which stays near 1: no overflow, no denormals), written
round by round (the first FMA of every chain, then the second...), then sums the chains.
One chain alone is bound by the FMA latency; independent FMAs next to each other in
program order keep every FMA unit busy within any out-of-order window, so IREE's
default vectorized build runs at the machine's FMA throughput, with memory traffic
negligible (8 bytes per ``2 x CHAINS x LENGTH`` FLOP). Measured on a Zen 4 core: 113-117
GFLOP/s, the 512-bit double-pumped FMA's 32 FLOP/cycle at about 3.6 GHz (numpy's
OpenBLAS matmul reached 102 in the same session); chains written one after another
reached 78-104.

How many chains keep the FMA units busy without spilling depends on the vector ISA:
IREE vectorizes the body 16 lanes wide, one AVX-512 register per chain but two AVX2
ones, so 12 chains spill AVX2's 16 registers. ``tdsched peak --threads 1 --cpu haswell
--refresh`` on the same Zen 4: 4 chains 83 GFLOP/s, 7 102, 12 62 (spilled); for AVX-512
113, 118 and 119. :data:`CHAIN_COUNTS` are the counts the peak is measured with; the
fastest counts.
"""

from __future__ import annotations

from tdsched.targets.workload import Workload

CHAINS = 12
"""Independent FMA chains per element by default: latency (4-5 cycles) x FMA ports (2),
rounded up (AVX-512)."""
CHAIN_COUNTS = (4, 7, 12)
"""The chain counts a peak measurement tries (module docstring): 12 for AVX-512, 7 for
AVX2's 16 registers, 4 for narrower machines."""
LENGTH = 32
"""FMAs per chain."""


def fma_probe(elements: int = 262144, chains: int = CHAINS) -> Workload:
    """The probe workload over ``elements`` f32 values with ``chains`` independent FMA
    chains (its FLOPs, as :mod:`tdsched.transform_lib.work` counts them: 2 per FMA, 1 per
    add)."""
    t = f"tensor<{elements}xf32>"
    body = [f"    %s{c} = arith.addf %x, %k{c} : f32" for c in range(chains)]
    ends = [f"%s{c}" for c in range(chains)]
    for r in range(LENGTH):  # round by round: each round's FMAs are independent
        for c in range(chains):
            body.append(f"    %f{c}_{r} = math.fma {ends[c]}, %a, %b : f32")
            ends[c] = f"%f{c}_{r}"
    total = ends[0]
    for c, end in enumerate(ends[1:]):
        body.append(f"    %t{c} = arith.addf {total}, {end} : f32")
        total = f"%t{c}"
    mlir = "\n".join(
        [
            "#id = affine_map<(d0) -> (d0)>",
            f"func.func @probe(%in: {t}) -> {t} {{",
            "  %a = arith.constant 0.999 : f32",
            "  %b = arith.constant 0.001 : f32",
            *(f"  %k{c} = arith.constant {float(c)} : f32" for c in range(chains)),
            f"  %e = tensor.empty() : {t}",
            '  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}',
            f"      ins(%in : {t}) outs(%e : {t}) {{",
            "  ^bb0(%x: f32, %o: f32):",
            *body,
            f"    linalg.yield {total} : f32",
            f"  }} -> {t}",
            f"  return %r : {t}",
            "}",
            "",
        ]
    )
    return Workload(f"fma_probe_{chains}x{LENGTH}_{elements}", mlir, "probe")
