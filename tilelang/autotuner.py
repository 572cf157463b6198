"""``tilelang.autotuner``: this module *is* :mod:`tilelang_core.autotuner` (see docs/autotune.md)."""

import sys

import tilelang_core.autotuner as _autotuner

sys.modules[__name__] = _autotuner
