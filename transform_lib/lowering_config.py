"""``compilation_info`` attributes for config-only kernel schedules.

A config keeps IREE's own codegen pipeline and only sets its tile sizes (and GPU
workgroup size). Levels: ``workgroup`` (distribution to workgroups), ``vector`` or
``thread`` (per-thread / vector tile), ``reduction`` (reduction-loop tile).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import ScheduleError

_CPU_LEVELS = {
    "workgroup": "distribution",
    "vector": "vector_common_parallel",
    "reduction": "vector_reduction",
}
_GPU_LEVELS = {"workgroup": "workgroup", "thread": "thread", "reduction": "reduction"}
_DEFAULT_PIPELINE = {"x86": "DoubleTilingExpert", "vulkan": "BaseVectorize"}
_PIPELINE_ATTR = {"x86": "#iree_cpu.pipeline<{}>", "vulkan": "#iree_gpu.spirv_pipeline<{}>"}


def _list(sizes: Sequence[int]) -> str:
    return "[" + ", ".join(str(s) for s in sizes) + "]"


def compilation_info(
    target: str,
    tile_sizes: Mapping[str, Sequence[int]],
    workgroup_size: Sequence[int] | None = None,
    pipeline_name: str | None = None,
) -> str:
    """The ``#iree_codegen.compilation_info`` text for a config on ``target``.

    ``tile_sizes`` maps a level to sizes, ``workgroup_size`` is for GPUs, ``pipeline_name``
    names IREE's pipeline (x86 ``DoubleTilingExpert``...; vulkan ``BaseVectorize``,
    ``MatmulPromoteVectorize``...). Vulkan levels may be shorter than the loop count
    (trailing loops untiled), e.g. workgroup ``[64, 64]``, reduction ``[0, 0, 4]``.
    """
    pipeline = _PIPELINE_ATTR[target].format(pipeline_name or _DEFAULT_PIPELINE[target])
    levels = _CPU_LEVELS if target == "x86" else _GPU_LEVELS
    unknown = sorted(set(tile_sizes) - set(levels))
    if unknown:
        raise ScheduleError(
            f"config: tile level(s) {', '.join(unknown)} do not exist on {target}; "
            f"use {', '.join(levels)}"
        )
    if target == "x86":
        if len({len(s) for s in tile_sizes.values()}) != 1:
            raise ScheduleError("config: every tile level needs one size per loop (same length)")
        if workgroup_size:
            raise ScheduleError("config: workgroup_size applies to GPU targets (vulkan) only")
        fields = ", ".join(f"{levels[k]} = {_list(v)}" for k, v in tile_sizes.items())
        config = f"#iree_cpu.lowering_config<{fields}>"
        info = f"#iree_codegen.translation_info<pipeline = {pipeline}>"
    else:
        if not workgroup_size:
            raise ScheduleError("config: a Vulkan config needs workgroup_size [x, y, z]")
        ordered = [tile_sizes.get(level) for level in ("workgroup", "thread", "reduction")]
        present = [_list(s) for s in ordered if s is not None]
        config = f"#iree_codegen.lowering_config<tile_sizes = [{', '.join(present)}]>"
        info = (
            f"#iree_codegen.translation_info<pipeline = {pipeline} "
            f"workgroup_size = {_list(workgroup_size)}>"
        )
    return f"#iree_codegen.compilation_info<lowering_config = {config}, translation_info = {info}>"
