"""``T.atomic_add(dst, shared_tile, use_tma=True)``: a shared-memory tile added to global memory by
the GPU's bulk-copy unit (TMA) instead of one atomic per element.

The tile goes row by row (a row: the run of the tile along the last dimension of both buffers,
contiguous in memory; trailing dimensions the tile covers entirely in both buffers join the run)
through ``cp.reduce.async.bulk ... .add`` (CUDA sm_90 and later), which adds every element of
the run atomically in global memory. What is emitted, per call:

1. every thread: a proxy fence (``tma_store_fence``: the thread's writes to the tile are ordered
   before the bulk-copy unit reads it), then a block barrier;
2. if the first row's two addresses are 16-byte aligned, its size a positive multiple of 16
   bytes and the rows 16-byte multiples apart (``tma_store_ready`` and the row strides, checked
   when the kernel runs; the same answer in every thread): one thread (a ``T.Parallel(1)`` loop)
   issues ``tma_store_add`` for each row inside the buffers, then ``tma_store_wait`` (the
   reductions have completed); otherwise the block adds the tile one atomic per element, as
   without ``use_tma``;
3. every thread: a block barrier (nobody overwrites the tile before it has been read).

What the bulk unit cannot do is updated element by element from the start (``add_tma`` atomic
markers, lowered as ordinary atomics): a value that is not a shared-memory tile (a scalar, a
fragment, global memory), a destination outside global memory, a value of another dtype
(converted per element), a memory order other than relaxed, a tile with no contiguous run along
the buffers' last dimension (a column, a last stride other than 1), rows that are never a
multiple of 16 bytes or 16-byte multiples apart, and a statement that some threads of the block
may not reach (inside an ``if``, a ``while`` or a ``T.Parallel`` loop: the barriers need them all).
Either way ``use_tma=True`` is refused on CUDA before sm_90 and on other targets
(:mod:`tilelang_core.lowering.tma_atomics`), so the target decides the same way for every tile.

dtypes: those of the bulk reduction, :data:`TMA_ADD_DTYPES`; another dtype is a
:class:`TmaAtomicError` when the kernel is defined.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ...errors import TargetFeatureError
from ._common import _expr, all_of, every_thread_gets_here, fail, guarded, is_unit, loop_nest, provably_inside, static_int
from .intrinsics import math_call
from .warp import sync_threads

#: dtypes ``cp.reduce.async.bulk`` adds (PTX: ``.add.noftz.f16/.bf16``, ``.add.f32/.s32/.u32/.u64``).
TMA_ADD_DTYPES = ("float16", "bfloat16", "float32", "int32", "uint32", "uint64")
#: Marker names (``tl.math`` intrinsic markers, lowered by lowering/tma_atomics.py).
FENCE = "tma_store_fence"
ADD = "tma_store_add"
READY = "tma_store_ready"
WAIT = "tma_store_wait"
MARKERS = (FENCE, ADD, READY, WAIT)
#: Storage scopes the bulk reduction reads from.
_SHARED = ("shared", "shared.dyn")


class TmaAtomicError(TargetFeatureError, tvm.error.InternalError):
    """``use_tma=True`` on an atomic the bulk-copy unit cannot do (dtype, operands or target).

    Also a ``tvm.error.InternalError``, which is what TileLang raises for these, so code that
    catches that keeps working.
    """


def check_dtype(op: str, operands: Any, dtype: str) -> None:
    """Refuse a destination dtype the bulk reduction does not add."""
    if dtype not in TMA_ADD_DTYPES:
        fail(
            op,
            operands,
            f"TMA atomic add does not support dtype {dtype}; supported scalar dtypes: "
            f"{', '.join(TMA_ADD_DTYPES)} (drop use_tma=True for one atomic per element)",
            TmaAtomicError,
        )


def _run_length(tile: Any, extent: Any) -> Any:
    """The elements of a row of ``tile`` inside its buffer: ``extent``, cut at the buffer's edge."""
    start, dim = tile.starts[-1], tile.shape[-1]
    if provably_inside(start, extent, dim):
        return static_int(extent) if static_int(extent) is not None else extent
    return tirx.max(tirx.min(_expr(extent), _expr(dim) - _expr(start)), 0)


def _strides(tile: Any) -> list:
    """The element strides of ``tile``'s buffer: its declared ones (``T.StridedTensor``, a strided
    ``T.view``), else those of a row-major buffer of its shape."""
    declared = list(tile.buffer.ty.strides)
    if declared:
        return declared
    strides: list = [1]
    for dim in reversed(tile.shape[1:]):
        strides.insert(0, strides[0] * (static_int(dim) if static_int(dim) is not None else dim))
    return strides


def _full_after(tile: Any, position: int) -> bool:
    """Whether ``tile``'s elements from dimension ``position`` on are one contiguous run of its
    buffer: constant extents covering every later dimension entirely, inside the buffer in
    dimension ``position``, and row-major strides there."""
    strides = [static_int(x) for x in _strides(tile)]
    for q, (start, extent, dim) in enumerate(zip(tile.starts, tile.extents, tile.shape)):
        s, e, d = static_int(start), static_int(extent), static_int(dim)
        if q < position:
            continue
        if None in (s, e, d) or s < 0 or s + e > d or (q > position and (s != 0 or e != d)):
            return False
        if q > position and (strides[q - 1] is None or strides[q] is None or strides[q - 1] != strides[q] * d):
            return False
    return True


def _folded_dims(d: Any, v: Any) -> int:
    """How many trailing dimensions of the tile make one contiguous run in both buffers (at least
    the last one, which the caller has checked)."""
    positions = [[i for i, e in enumerate(t.extents) if not is_unit(e)] for t in (d, v)]
    fold = 1
    while fold < len(d.squeezed):
        j = len(d.squeezed) - fold - 1
        if not all(_full_after(t, pos[j]) for t, pos in zip((d, v), positions)):
            break
        fold += 1
    return fold


def _row_pitches_aligned(tile: Any, outer: int, item: int) -> Optional[list]:
    """Conditions that every row of ``tile`` starts 16 bytes after a multiple of 16 from its first
    row (the strides of its first ``outer`` non-unit dimensions, in bytes, multiples of 16): the
    run-time ones; None when a constant stride rules it out."""
    strides = _strides(tile)
    positions = [i for i, e in enumerate(tile.extents) if not is_unit(e)][:outer]
    conds = []
    for pos in positions:
        stride = strides[pos]
        if static_int(stride) is not None:
            if (static_int(stride) * item) % 16:
                return None
            continue
        conds.append(tirx.EQ(tirx.floormod(stride * item, 16), tirx.IntImm(str(stride.ty.dtype), 0)))
    return conds


def bulk_rows(op: str, operands: Any, d: Any, v: Any, order: str, loc: str, per_element: Callable[[], None]) -> bool:
    """Emit ``d += v`` (tiles of the same extents) as bulk reductions, with ``per_element()`` (the
    element-by-element form) where the addresses turn out misaligned when the kernel runs; False
    (nothing emitted) when the bulk unit cannot do it at all: ``v`` not in shared memory, ``d``
    not in global memory, different dtypes, a memory order other than relaxed, no run along the
    buffers' last dimension (or a last stride other than 1), rows that are never a multiple of
    16 bytes, a statement some threads may not reach (block barriers)."""
    if v.scope not in _SHARED or d.scope != "global" or v.dtype != d.dtype or order != "relaxed":
        return False  # the bulk unit reads shared memory, writes global memory, converts nothing, is relaxed
    if is_unit(d.extents[-1]) or is_unit(v.extents[-1]) or not d.squeezed:
        return False  # the tile has no run along the buffers' last dimension
    if any(static_int(_strides(t)[-1]) != 1 for t in (d, v)):
        return False  # the last dimension is not contiguous
    if not every_thread_gets_here(serial_loops=True):
        return False
    fold = _folded_dims(d, v)
    if fold > 1:  # whole rows of both buffers: one run spans them
        elements = 1
        for extent in d.squeezed[-fold:]:
            elements *= static_int(extent)
        count: Any = tirx.IntImm("int32", elements)
    else:
        run = d.squeezed[-1]
        count_d, count_v = _run_length(d, run), _run_length(v, run)
        same = static_int(count_d) is not None and static_int(count_d) == static_int(count_v)
        count = _expr(count_d) if same else tirx.min(_expr(count_d), _expr(count_v))
    item = tvm.runtime.DataType(d.dtype).bits // 8
    if static_int(count) is not None and (static_int(count) * item) % 16:
        return False  # no row can be a multiple of 16 bytes
    outer = len(d.squeezed) - fold
    pitches = [_row_pitches_aligned(t, outer, item) for t in (d, v)]
    if any(p is None for p in pitches):
        return False  # rows 16 bytes apart never

    first = [tirx.IntImm("int32", 0)] * len(d.squeezed)
    ready = math_call("bool", READY, tirx.address_of(d.buffer[tuple(d.indices(first))]),
                      tirx.address_of(v.buffer[tuple(v.indices(first))]), count, mode=d.dtype)
    for cond in pitches[0] + pitches[1]:
        ready = tirx.And(ready, cond)

    def row(outer_vars: list) -> None:
        at = outer_vars + [tirx.IntImm("int32", 0)] * fold
        dst = tirx.address_of(d.buffer[tuple(d.indices(at))])
        src = tirx.address_of(v.buffer[tuple(v.indices(at))])
        cond = all_of([d.bounds_condition(at), v.bounds_condition(at)])
        guarded(cond, lambda: _B.evaluate(math_call("int32", ADD, dst, src, count, mode=d.dtype)))

    def one_thread(_vars: list) -> None:
        loop_nest(d.squeezed[:-fold], parallel=False, body=row)
        _B.evaluate(math_call("int32", WAIT))

    _B.evaluate(math_call("int32", FENCE))
    _B.evaluate(sync_threads())
    with _B.If(ready):  # the same for every thread: where the tile lies, not which thread asks
        with _B.Then():
            loop_nest([1], parallel=True, body=one_thread)
        with _B.Else():
            per_element()
    _B.evaluate(sync_threads())
    return True
