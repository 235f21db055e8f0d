"""The measurement core: what a build is for (:class:`.build_target.BuildTarget`), shared
by ``run``, ``sweep``, ``regress`` and ``tune`` instead of each carrying target, CPU, CPU
features, GPU and threads as loose fields (docs/architecture.md)."""
