"""Recipe → transform scripts → IREE build: what a build is for (``build_target``), the
plan and the builds (``pipeline``), the emitted scripts (``emit``, ``graph_rewrites``),
each step's effect (``step_trace``, ``step_views``) and kept build folders
(``build_folders``). Imports ``base``, ``dsl`` and ``frontends``; runs nothing it built."""
