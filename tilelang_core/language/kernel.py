"""``tilelang.language.kernel``: ``T.Kernel`` and how it reads its ``threads`` argument.

The construct itself lives in :mod:`tilelang_core.language.core`; this module is where TileLang
code finds it by module (``from tilelang.language.kernel import Kernel``).
"""

from .core import DEFAULT_THREADS, Kernel, _normalize_threads  # noqa: F401

__all__ = ["Kernel", "DEFAULT_THREADS"]
