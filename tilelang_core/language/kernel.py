"""``tilelang.language.kernel``: ``T.Kernel``, how it reads its ``threads`` argument, and the
launch-size queries ``get_thread_extent(s)`` / ``get_block_extent(s)``.

The construct itself lives in :mod:`tilelang_core.language.core`; this module is where TileLang
code finds it by module (``from tilelang.language.kernel import Kernel``).
"""

from .core import DEFAULT_THREADS, Kernel, _normalize_threads  # noqa: F401
from .tileops.launch import get_block_extent, get_block_extents, get_thread_extent, get_thread_extents  # noqa: F401

__all__ = ["Kernel", "DEFAULT_THREADS", "get_thread_extent", "get_thread_extents", "get_block_extent",
           "get_block_extents"]
