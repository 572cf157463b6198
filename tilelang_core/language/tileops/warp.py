"""Warp and thread-index helpers and explicit barriers of the kernel language (TileLang names).

- Thread indices (int32), from the block-linear thread id ``tid = x + y*X + z*X*Y`` of the
  enclosing ``T.Kernel``: ``T.get_lane_idx(warp_size=None)`` (``tid % warp_size``),
  ``T.get_warp_idx(warp_size=None)`` and ``T.get_warp_idx_sync(warp_size=None)`` (both
  ``tid // warp_size``), ``T.get_warp_group_idx(warp_size=None, warps_per_group=None)``
  (``tid // (warp_size * warps_per_group)``); warp size 32 and 4 warps per group by default.
- ``T.shuffle_elect(thread_extent)`` (bool): true for one thread in each group of
  ``thread_extent`` consecutive thread ids (the first one), or for thread 0 alone when 0.
- ``T.warp_reduce_sum/max/min/bitand/bitor(value)``: the reduction of ``value`` over the 32
  lanes of the warp, given to every lane (a butterfly of ``__shfl_xor_sync``).
- Barriers: ``T.sync_warp(mask=None)`` (``__syncwarp``), ``T.sync_threads(barrier_id=None,
  arrive_count=None)`` (``__syncthreads()`` or a named barrier ``bar.sync``); both do nothing on
  CPU targets. ``T.sync_grid()`` exists and is refused when lowering (no cooperative launch).

Each returns a marker call of :mod:`.intrinsics` (``tl.math``): the thread indices are resolved
by the frontend (:mod:`tilelang_core.lowering.warp`, which knows ``tid``), the others lowered for
CUDA there too; every one but the barriers is a ``LoweringError`` on CPU targets.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional

import tvm
from tvm import tirx

from ._common import OperandTypeError, fail
from .intrinsics import _FULL_MASK, _dtype, _expr, _mask, math_call

#: Defaults of the thread-index helpers (NVIDIA warps, Hopper warp groups).
WARP_SIZE = 32
WARPS_PER_GROUP = 4

#: Marker names resolved from the block-linear thread id (lowering/warp.py).
INDEX_MARKERS = ("lane_idx", "warp_idx", "warp_idx_sync", "warp_group_idx", "shuffle_elect")
#: Marker names of the warp reductions.
REDUCE_MARKERS = ("warp_reduce_sum", "warp_reduce_max", "warp_reduce_min", "warp_reduce_bitand", "warp_reduce_bitor")

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _positive(name: str, role: str, value: Any, default: int, operands: tuple) -> Any:
    """``value`` as an int32 expression: a positive int, or an integer expression; ``default`` for None."""
    if value is None:
        return tirx.IntImm("int32", default)
    if isinstance(value, bool):
        fail(f"T.{name}", operands, f"{role} must be a positive integer or an integer expression, got {value!r}",
             OperandTypeError)
    if isinstance(value, Integral):
        if value <= 0:
            fail(f"T.{name}", operands, f"{role} must be a positive integer, got {int(value)}")
        return tirx.IntImm("int32", int(value))
    expr = _expr(value)
    dtype = _dtype(expr)
    if not dtype.startswith(("int", "uint")) or tvm.runtime.DataType(dtype).lanes != 1:
        fail(f"T.{name}", operands, f"{role} must be a positive integer or an integer expression, got "
             f"{dtype or type(value).__name__}", OperandTypeError)
    if isinstance(expr, tirx.IntImm) and expr.value <= 0:
        fail(f"T.{name}", operands, f"{role} must be a positive integer, got {int(expr.value)}")
    return expr if dtype == "int32" else tirx.Cast("int32", expr)


def get_lane_idx(warp_size: Optional[Any] = None) -> Any:
    """Lane of the calling thread in its warp: ``tid % warp_size`` (int32), where ``tid`` is the
    block-linear thread id of the enclosing ``T.Kernel`` and ``warp_size`` 32 by default. GPU only."""
    ws = _positive("get_lane_idx", "warp_size", warp_size, WARP_SIZE, (warp_size,))
    return math_call("int32", "lane_idx", ws)


def get_warp_idx(warp_size: Optional[Any] = None) -> Any:
    """Warp of the calling thread in its block: ``tid // warp_size`` (int32, ``warp_size`` 32 by
    default). GPU only."""
    ws = _positive("get_warp_idx", "warp_size", warp_size, WARP_SIZE, (warp_size,))
    return math_call("int32", "warp_idx", ws)


def get_warp_idx_sync(warp_size: Optional[Any] = None) -> Any:
    """The same value as :func:`get_warp_idx` (``tid // warp_size``). Upstream reads it through a
    warp shuffle to tell the compiler that it is uniform in the warp; here it is computed from the
    thread indices, which needs no converged warp. GPU only."""
    ws = _positive("get_warp_idx_sync", "warp_size", warp_size, WARP_SIZE, (warp_size,))
    return math_call("int32", "warp_idx_sync", ws)


def get_warp_group_idx(warp_size: Optional[Any] = None, warps_per_group: Optional[Any] = None) -> Any:
    """Warp group of the calling thread: ``tid // (warp_size * warps_per_group)`` (int32; 32 and 4
    by default). ``warps_per_group`` needs ``warp_size`` too, as upstream. GPU only."""
    operands = (warp_size, warps_per_group)
    if warps_per_group is not None and warp_size is None:
        fail("T.get_warp_group_idx", operands, "warps_per_group needs warp_size as well: give both "
             f"(T.get_warp_group_idx({WARP_SIZE}, {warps_per_group!r}) for {WARP_SIZE}-thread warps)")
    ws = _positive("get_warp_group_idx", "warp_size", warp_size, WARP_SIZE, operands)
    wpg = _positive("get_warp_group_idx", "warps_per_group", warps_per_group, WARPS_PER_GROUP, operands)
    return math_call("int32", "warp_group_idx", ws, wpg)


def shuffle_elect(thread_extent: int) -> Any:
    """True (bool) for exactly one thread in each group of ``thread_extent`` consecutive
    block-linear thread ids -- the first of the group, ``tid % thread_extent == 0`` -- and, for
    ``thread_extent=0``, for thread 0 of the block alone. ``thread_extent`` is a non-negative
    compile-time integer. GPU only."""
    value = thread_extent.value if isinstance(thread_extent, tirx.IntImm) else thread_extent
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        fail("T.shuffle_elect", (thread_extent,), "thread_extent must be a non-negative integer known when the "
             f"kernel is defined (0: one thread of the whole block), got {thread_extent!r}")
    return math_call("bool", "shuffle_elect", tirx.IntImm("int32", int(value)))


def _reduce(op: str, value: Any) -> Any:
    name = f"warp_reduce_{op}"
    v = _expr(value)
    dtype = _dtype(v)
    allowed = _INT_DTYPES if op in ("bitand", "bitor") else _INT_DTYPES + _FLOAT_DTYPES
    if dtype not in allowed:
        kinds = "integer" if op in ("bitand", "bitor") else "integer or float"
        fail(f"T.{name}", (value,), f"T.{name} needs a scalar {kinds} value ({', '.join(allowed)}), got "
             f"{dtype or type(value).__name__}", OperandTypeError)
    return math_call(dtype, name, v)


def warp_reduce_sum(value: Any) -> Any:
    """Sum of ``value`` over the 32 lanes of the warp, the same on every lane. Integers wrap as in
    their dtype; float16/bfloat16 are added in float32 and rounded once. Every lane of the warp must
    call it (full-mask ``__shfl_xor_sync``). GPU only."""
    return _reduce("sum", value)


def warp_reduce_max(value: Any) -> Any:
    """Maximum of ``value`` over the 32 lanes of the warp, on every lane. Floats use ``fmaxf``/
    ``fmax``: a NaN lane is ignored (the result is NaN only when every lane is NaN). GPU only."""
    return _reduce("max", value)


def warp_reduce_min(value: Any) -> Any:
    """Minimum of ``value`` over the 32 lanes of the warp, on every lane. Floats use ``fminf``/
    ``fmin``: a NaN lane is ignored (the result is NaN only when every lane is NaN). GPU only."""
    return _reduce("min", value)


def warp_reduce_bitand(value: Any) -> Any:
    """Bitwise and of ``value`` (an integer) over the 32 lanes of the warp, on every lane. GPU only."""
    return _reduce("bitand", value)


def warp_reduce_bitor(value: Any) -> Any:
    """Bitwise or of ``value`` (an integer) over the 32 lanes of the warp, on every lane. GPU only."""
    return _reduce("bitor", value)


def sync_warp(mask: Optional[Any] = None) -> Any:
    """Barrier of the lanes of ``mask`` in the warp (``__syncwarp(mask)``; all 32 lanes by default).

    On CPU targets it does nothing: a CPU block runs as one thread, so every earlier write of the
    block is already visible.
    """
    m = _mask(_FULL_MASK if mask is None else mask)
    if not _dtype(m).startswith(("int", "uint")):
        fail("T.sync_warp", (mask,), f"mask must be an integer, got {_dtype(m) or type(mask).__name__}", OperandTypeError)
    return math_call("int32", "sync_warp", m)


def _barrier_arg(role: str, value: Any, operands: tuple) -> Any:
    if isinstance(value, bool):
        fail("T.sync_threads", operands, f"{role} must be an integer, got {value!r}", OperandTypeError)
    expr = _expr(value)
    dtype = _dtype(expr)
    if not dtype.startswith(("int", "uint")):
        fail("T.sync_threads", operands, f"{role} must be an integer, got {dtype or type(value).__name__}",
             OperandTypeError)
    return expr if dtype == "int32" else tirx.Cast("int32", expr)


def sync_threads(barrier_id: Optional[Any] = None, arrive_count: Optional[Any] = None) -> Any:
    """Barrier of the thread block.

    Without arguments ``__syncthreads()``. With ``barrier_id`` (0-15) a named barrier, ``bar.sync
    barrier_id[, arrive_count]``: the threads that reach it wait until ``arrive_count`` threads
    (a multiple of 32; all the block's threads when omitted) have arrived. Both may be expressions;
    constants are checked. TVM's automatic barrier insertion counts an explicit barrier as one (it
    adds no ``__syncthreads()`` where this one already orders the shared-memory accesses).

    On CPU targets it does nothing: a CPU block runs as one thread, so every earlier write of the
    block is already visible.
    """
    operands = tuple(a for a in (barrier_id, arrive_count) if a is not None)
    if barrier_id is None:
        if arrive_count is not None:
            fail("T.sync_threads", operands, "arrive_count needs a barrier_id (0-15): a named barrier; "
                 "T.sync_threads() alone waits for every thread of the block")
        return math_call("int32", "sync_threads")
    bid = _barrier_arg("barrier_id", barrier_id, operands)
    if isinstance(bid, tirx.IntImm) and not 0 <= bid.value <= 15:
        fail("T.sync_threads", operands, f"barrier_id must be between 0 and 15 (the GPU has 16 named "
             f"barriers), got {int(bid.value)}")
    if arrive_count is None:
        return math_call("int32", "sync_threads", bid)
    count = _barrier_arg("arrive_count", arrive_count, operands)
    if isinstance(count, tirx.IntImm) and (count.value <= 0 or count.value % 32):
        fail("T.sync_threads", operands, "arrive_count must be a positive multiple of 32 (whole warps "
             f"arrive at a named barrier), got {int(count.value)}")
    return math_call("int32", "sync_threads", bid, count)


def sync_grid() -> Any:
    """Barrier of every thread of the grid (upstream: cooperative groups' ``grid.sync()``).

    It needs a cooperative kernel launch, which no backend here performs, so lowering a kernel
    that uses it is a ``LoweringError`` at its line on every target. Split the kernel in two at
    the barrier instead: the second launch starts after the first has finished.
    """
    return math_call("int32", "sync_grid")
