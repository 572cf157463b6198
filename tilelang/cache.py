"""``tilelang.cache``: the kernel cache (see docs/cache.md).

This module *is* :mod:`tilelang_core.cache` (it replaces itself in ``sys.modules``).
``tilelang.disable_cache()`` / ``tilelang.enable_cache()`` switch it off and on for the process.
"""

import sys

import tilelang_core.cache as _cache

sys.modules[__name__] = _cache
