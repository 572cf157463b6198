"""``tilelang.profiler``: this module *is* :mod:`tilelang_core.profiler` (see docs/profiler.md)."""

import sys

import tilelang_core.profiler as _profiler

sys.modules[__name__] = _profiler
