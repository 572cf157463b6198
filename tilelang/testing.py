"""``import tilelang.testing``: pytest helpers for kernel tests (see docs/testing.md).

This module *is* :mod:`tilelang_core.testing` (it replaces itself in ``sys.modules``).
"""

import sys

import tilelang_core.testing as _testing

sys.modules[__name__] = _testing
