"""``import tilelang.language as T``: the kernel language.

This module *is* :mod:`tilelang_core.language` (it replaces itself in ``sys.modules``), so
``T.<anything>`` is exactly what the core's language defines.
"""

import sys

import tilelang_core.language as _language

sys.modules[__name__] = _language
