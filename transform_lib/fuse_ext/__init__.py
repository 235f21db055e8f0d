"""fuse_ext: reduction-aware, yield-preserving, linear-time tile-and-fuse.

See :mod:`.driver` for the algorithm and ``docs/primitives/fuse_ext.md`` for the
semantics users rely on.
"""

from .driver import FuseExtOptions, FuseExtReport, fuse_ext
from .plan import FuseExtError

__all__ = ["FuseExtError", "FuseExtOptions", "FuseExtReport", "fuse_ext"]
