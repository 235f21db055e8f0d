"""tdsched: a transform-dialect scheduling DSL for MLIR linalg, compiled through IREE.

The code lives in four subpackages, each a top-level folder of the repository:
``tdsched.schedules`` (recipes, front ends, commands), ``tdsched.transform_lib``
(primitives that emit transform IR), ``tdsched.targets`` (compile, run, time on x86 and
Vulkan) and ``tdsched.recipes`` (shipped recipes and workloads). This package itself only
makes ``python -m tdsched`` the same as the ``tdsched`` command.
"""
