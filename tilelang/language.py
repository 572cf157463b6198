"""``import tilelang.language as T``: the kernel language (see :mod:`tilelang_core.language`)."""

from tilelang_core.language import *  # noqa: F401,F403
from tilelang_core.language import __all__  # noqa: F401
