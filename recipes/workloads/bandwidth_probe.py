"""A memory-bound probe with a given traffic: the bandwidth a workload is judged against.

A memory-bound workload's speed is read as GB/s of its compulsory traffic (every input
read once, every output written once). To say what fraction of the machine's bandwidth
that is, the same run times a probe that moves the same bytes in the same read/write
mix with nothing to compute: one elementwise op over a 1-D domain as large as the
workload's largest tensor, with as many such inputs and outputs as the workload's traffic
needs. Writes cost more than reads on CPUs (a cache line is read before it is written),
so matching the mix, not just the byte count, keeps the comparison fair. Each output gets
its own ``tensor.empty`` (sharing one makes IREE copy).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tdsched.targets.workload import Workload


def bandwidth_probe(
    inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]
) -> tuple[Workload, list[np.ndarray]]:
    """The probe workload for a workload with these inputs and outputs, and its inputs.

    Precondition: every array is float32 (the probe streams f32 elements).
    """
    arrays = [*inputs, *outputs]
    elements = max(a.size for a in arrays)
    reads = max(1, round(sum(a.size for a in inputs) / elements))
    writes = max(1, round(sum(a.size for a in outputs) / elements))
    t = f"tensor<{elements}xf32>"
    args = ", ".join(f"%in{i}: {t}" for i in range(reads))
    maps = ", ".join(["#id"] * (reads + writes))
    ins = ", ".join(f"%in{i}" for i in range(reads))
    block_args = ", ".join(
        [f"%x{i}: f32" for i in range(reads)] + [f"%o{j}: f32" for j in range(writes)]
    )
    total = "%x0"
    body = []
    for i in range(1, reads):
        body.append(f"    %s{i} = arith.addf {total}, %x{i} : f32")
        total = f"%s{i}"
    yields = []
    for j in range(writes):
        body.append(f"    %c{j} = arith.constant {float(j)} : f32")
        body.append(f"    %y{j} = arith.addf {total}, %c{j} : f32")
        yields.append(f"%y{j}")
    results = ", ".join([t] * writes)
    mlir = "\n".join(
        [
            "#id = affine_map<(d0) -> (d0)>",
            f"func.func @probe({args}) -> ({results}) {{",
            *(f"  %e{j} = tensor.empty() : {t}" for j in range(writes)),
            f"  %r:{writes} = linalg.generic {{indexing_maps = [{maps}], "
            'iterator_types = ["parallel"]}',
            f"      ins({ins} : {', '.join([t] * reads)}) "
            f"outs({', '.join(f'%e{j}' for j in range(writes))} : {', '.join([t] * writes)}) {{",
            f"  ^bb0({block_args}):",
            *body,
            f"    linalg.yield {', '.join(yields)} : {', '.join(['f32'] * writes)}",
            f"  }} -> ({results})",
            f"  return {', '.join(f'%r#{j}' for j in range(writes))} : {results}",
            "}",
            "",
        ]
    )
    rng = np.random.default_rng(0)
    probe_inputs = [rng.random(elements, dtype=np.float32) for _ in range(reads)]
    return Workload(f"bandwidth_probe_{reads}r{writes}w_{elements}", mlir, "probe"), probe_inputs
