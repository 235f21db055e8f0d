"""Graph-level rewrites of the whole linalg module, run by tdsched before IREE.

Each primitive here is a function ``(module, options) -> RewriteReport`` that rewrites an
``ir.Module`` in place, in the current MLIR context, and reports in one line what it
changed ("changed nothing" when it did not). Many of them have no transform op in IREE
3.13, so they are written over the MLIR Python bindings; the ones that do are run as
small transform scripts. :func:`tdsched.transform_lib.graph.report.rewrite_text` runs any
of them on module text.
"""
