"""``tilelang.language.tir.op``: TIR's operator functions (``tvm.tirx.op``), without vendor-only ones.

Everything :mod:`tvm.tirx.op` defines (math, ``call_extern``, ``if_then_else``, bit operations,
...), except the names :data:`~tilelang_core.language.tir.exports.BACKEND_ONLY_TIR_EXPORTS`
assigns to a single vendor.
"""

from __future__ import annotations

import tvm.tirx.op as _op

from .exports import BACKEND_ONLY_TIR_EXPORTS as _VENDOR_ONLY

__all__ = sorted(n for n in dir(_op) if not n.startswith("_") and n not in _VENDOR_ONLY and callable(getattr(_op, n)))

globals().update({n: getattr(_op, n) for n in __all__})
