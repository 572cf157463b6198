"""Stores of a ``T.Parallel`` body into global memory never leave their tensor.

A kernel may write a whole tile with an element loop even where the tile crosses the edge of
the tensor (``C[m0 + i, n0 + j] = acc[i, j]`` in ``T.Parallel(block_M, block_N)`` with ``N`` not
a multiple of ``block_N``): TileLang guards such stores, so kernels written for it rely on that.
:func:`guard_global_stores` wraps each store into a ``global``-scope buffer (a tensor parameter,
``T.alloc_global``) whose indices are not known to lie inside the buffer in
``if 0 <= index < dim and ...:``; a store outside the buffer is skipped, as ``T.copy`` skips the
parts of a tile outside its destination (docs/tile-operators.md). A condition TVM's analyzer
proves from the ranges of the ``T.Kernel`` block indices and the ``T.Parallel`` loops (tiles that
divide static shapes) is not added at all, so such kernels keep their guard-free loops.
Loads are left as they are (``T.annotate_safe_value`` guards them on request).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import tvm_ffi
from tvm import tirx

from ..language.tileops._common import all_of, static_int

__all__ = ["guard_global_stores"]


def _bounds(store: Any, analyzer: Any) -> Optional[Any]:
    """The condition keeping ``store`` inside its buffer, None when it provably is (or cannot be told)."""
    buffer = store.buffer
    conds = []
    for index, dim in zip(store.indices, buffer.ty.shape):
        if type(index).__name__ == "Ramp":
            return None  # vector stores come from the operators, which guard themselves
        i, d = static_int(index), static_int(dim)
        if i is not None and d is not None and 0 <= i < d:
            continue
        lower = index >= tirx.IntImm(index.ty.dtype, 0)
        upper = index < tirx.Cast(index.ty.dtype, dim) if str(dim.ty.dtype) != str(index.ty.dtype) else index < dim
        if (i is None or i < 0) and not _provable(analyzer, index, None):
            conds.append(lower)
        if not _provable(analyzer, index, dim):
            conds.append(upper)
    return all_of(conds)


def _narrow(expr: Any) -> Any:
    """``expr`` without widening integer casts (``int64(i)`` of an int32 ``i``): they keep order,
    and TVM's analyzer does not carry a symbolic bound (``i < m``) through them."""
    while type(expr).__name__ == "Cast" and str(expr.ty.dtype).startswith("int"):
        inner = expr.value
        if not str(inner.ty.dtype).startswith("int"):
            break
        if int(str(inner.ty.dtype)[3:] or 32) > int(str(expr.ty.dtype)[3:] or 32):
            break
        expr = inner
    return expr


def _provable(analyzer: Any, index: Any, dim: Optional[Any]) -> bool:
    """Whether ``0 <= index`` (``dim`` None) or ``index < dim`` follows from the known ranges."""
    if dim is None:
        return bool(analyzer.can_prove(index >= tirx.IntImm(index.ty.dtype, 0)))
    if analyzer.can_prove(index < (dim if str(dim.ty.dtype) == str(index.ty.dtype) else tirx.Cast(index.ty.dtype, dim))):
        return True
    i, d = _narrow(index), _narrow(dim)
    if str(i.ty.dtype) != str(d.ty.dtype):
        static = static_int(d)
        if static is None or static >= 2**31 or not str(i.ty.dtype) == "int32":
            return False
        d = tirx.IntImm("int32", static)
    return bool(analyzer.can_prove(i < d))


def guard_global_stores(body: Any, loops: Sequence[Any] = ()) -> Any:
    """``body`` (one ``T.Parallel`` nest's) with its stores into global memory guarded (module docstring).

    :param loops: the ``For`` loops around ``body`` whose ranges are known (the kernel's block
        loops, the ``T.Parallel`` nest): a bound they imply adds no guard.
    """
    import tvm

    analyzer = tvm.sym.Analyzer()
    for loop in loops:
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))

    def on_store(store: Any) -> Any:
        if (str(store.buffer.ty.storage_scope) or "global") != "global":
            return store
        cond = _bounds(store, analyzer)
        return store if cond is None else tirx.IfThenElse(cond, store, None)

    return tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store)])
