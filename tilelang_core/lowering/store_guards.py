"""Stores of a ``T.Parallel`` body into global memory never leave their tensor.

A kernel may write a whole tile with an element loop even where the tile crosses the edge of
the tensor (``C[m0 + i, n0 + j] = acc[i, j]`` in ``T.Parallel(block_M, block_N)`` with ``N`` not
a multiple of ``block_N``): TileLang guards such stores, so kernels written for it rely on that.
:func:`guard_global_stores` wraps each store into a ``global``-scope buffer (a tensor parameter,
``T.alloc_global``) whose indices are not known to lie inside the buffer in
``if 0 <= index < dim and ...:``; a store outside the buffer is skipped, as ``T.copy`` skips the
parts of a tile outside its destination (docs/tile-operators.md). Conditions TVM's simplifier
can prove from the loop ranges (tiles that divide the shapes) disappear later in the pipeline.
Loads are left as they are (``T.annotate_safe_value`` guards them on request).
"""

from __future__ import annotations

from typing import Any, Optional

import tvm_ffi
from tvm import tirx

__all__ = ["guard_global_stores"]


def _static(expr: Any) -> Optional[int]:
    value = getattr(expr, "value", None)
    return value if isinstance(value, int) and type(expr).__name__ == "IntImm" else None


def _bounds(store: Any) -> Optional[Any]:
    """The condition keeping ``store`` inside its buffer, None when it provably is (or cannot be told)."""
    buffer = store.buffer
    conds = []
    for index, dim in zip(store.indices, buffer.ty.shape):
        if type(index).__name__ == "Ramp":
            return None  # vector stores come from the operators, which guard themselves
        i, d = _static(index), _static(dim)
        if i is not None and d is not None and 0 <= i < d:
            continue
        if i is None or i < 0:
            conds.append(index >= tirx.IntImm(index.ty.dtype, 0))
        conds.append(index < tirx.Cast(index.ty.dtype, dim) if str(dim.ty.dtype) != str(index.ty.dtype) else index < dim)
    if not conds:
        return None
    cond = conds[0]
    for c in conds[1:]:
        cond = tirx.And(cond, c)
    return cond


def guard_global_stores(body: Any) -> Any:
    """``body`` (one ``T.Parallel`` nest's) with its stores into global memory guarded (module docstring)."""

    def on_store(store: Any) -> Any:
        if (str(store.buffer.ty.storage_scope) or "global") != "global":
            return store
        cond = _bounds(store)
        return store if cond is None else tirx.IfThenElse(cond, store, None)

    return tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store)])
