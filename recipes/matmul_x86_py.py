"""matmul_x86 written with the Python API: the same recipe as matmul_x86.yaml.

Run it like any recipe: ``tdsched run recipes/matmul_x86_py.py``. The kernel schedule
reads in the order it applies: workgroup tiling with the fill fused in, reduction tiling,
register tiling, then vectorization; the packed layout replaces it with a graph step.
"""

from tdsched.schedules.frontends.python_api import Match, P, Pow2, RecipeBuilder, generator

r = RecipeBuilder(
    "matmul_x86_py",
    workload=generator("matmul", M=P("M"), N=P("N"), K=P("K"), dtype="f32", weights=P("WEIGHTS")),
    targets=["x86"],
    description="f32 matmul on x86, register-tiled in place or packed (mmt4d) per shape",
)
r.parameters(WEIGHTS="input", M=1024, N=1024, K=1024, TM=64, TN=128, TK=256, RM=8, RN=32, RK=1)
# LAYOUT rowmajor: the kernel schedule below; packed: pack + mmt4d + unpack (IREE's
# data-tiling layout), compiled by IREE's mmt4d codegen; UNPACK fused puts the unpack in
# the mmt4d's dispatch. The shape table picks per shape.
r.parameters(LAYOUT="rowmajor", M0=16, N0=32, K0=1, UNPACK="separate")
r.compile_flags("--iree-llvmcpu-enable-ukernels=none")
r.tolerance(atol=1e-3, rtol=1e-4)
# What `tdsched sweep` explores; `tdsched run` uses the defaults above.
r.space(
    TM=Pow2(8, 128),
    TN=Pow2(32, 256),
    TK=Pow2(32, 512),
    RN=[16, 32],
    LAYOUT=["rowmajor", "packed"],
    UNPACK=["separate", "fused"],
)
r.constrain("TM * TN <= 16384", "TM % RM == 0 and TN % RN == 0", "K % TK == 0")
# Tuned parameters per shape: the table tdsched sweep --shape filled for the shipped
# matmul_x86 (by name, so a frozen copy of this file finds it too).
r.shapes_from("matmul_x86")

tile = [P("M0"), P("N0"), P("K0")]
r.graph.step("mmt4d", tile=tile, when="LAYOUT == 'packed' and UNPACK == 'separate'")
r.graph.step("mmt4d", tile=tile, fuse_unpack=True, when="LAYOUT == 'packed' and UNPACK == 'fused'")
k = r.kernel("matmul", match=Match(kind="contraction"), when="LAYOUT == 'rowmajor'")
fill = k.match("linalg.fill", name="fill")
workgroups = k.root.tile([P("TM"), P("TN"), 0], loop="forall", mapping="workgroup")
fill.fuse_into(workgroups)
k.cleanup()
k.root.tile([0, 0, P("TK")])  # reduction tile: the fill stays outside this loop
k.root.tile([P("RM"), P("RN"), 0])  # register tile
k.root.tile([0, 0, P("RK")])
fill.tile([P("RM"), P("RN")])
k.cleanup()
k.vectorize()

recipe = r.build()
