"""``T.atomic_add(dst, shared_tile, use_tma=True)``: a shared-memory tile added to global memory by
the GPU's bulk-copy unit (TMA) instead of one atomic per element.

The tile goes row by row (a row: the run of the tile along the last dimension of both buffers,
contiguous in memory) through ``cp.reduce.async.bulk ... .add`` (CUDA sm_90 and later), which
adds every element of the run atomically in global memory. What is emitted, per call:

1. every thread: a proxy fence (``tma_store_fence``: the block's writes to shared memory become
   visible to the bulk-copy unit), then a block barrier;
2. one thread (a ``T.Parallel(1)`` loop): for each row, ``tma_store_add`` when the row's two
   addresses are 16-byte aligned and its size a multiple of 16 bytes (``tma_store_ready``, a
   run-time check), else one atomic per element of the row; then ``tma_store_wait`` (the
   reductions have read shared memory and written global memory);
3. every thread: a block barrier (nobody overwrites the tile before it has been read).

What the bulk unit cannot do is updated element by element (``add_tma`` atomic markers, lowered
as ordinary atomics): a value that is not a shared-memory tile (a scalar, a fragment, global
memory), a destination outside global memory, a value of another dtype (converted per element),
a memory order other than relaxed, a tile with no run along the buffers' last dimension (a
column), rows that are never a multiple of 16 bytes. Either way ``use_tma=True`` is refused on CUDA before sm_90 and on CPU targets
(:mod:`tilelang_core.lowering.tma_atomics`), so the target decides the same way for every tile.

dtypes: those of the bulk reduction, :data:`TMA_ADD_DTYPES`; another dtype is a
:class:`TmaAtomicError` when the kernel is defined.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ...errors import TargetFeatureError
from ._common import all_of, analyzer, fail, guarded, is_unit, loop_nest, static_int
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


def _int32(x: Any) -> Any:
    return tirx.IntImm("int32", x) if isinstance(x, int) else x


def _run_length(tile: Any, extent: Any) -> Any:
    """The elements of a row of ``tile`` inside its buffer: ``extent``, cut at the buffer's edge."""
    start, dim = tile.starts[-1], tile.shape[-1]
    s, e, d = static_int(start), static_int(extent), static_int(dim)
    if s is not None and e is not None and d is not None and s + e <= d:
        return e
    as_expr = [_int32(x) for x in (start, extent, dim)]
    try:
        if analyzer().can_prove(as_expr[0] + as_expr[1] <= as_expr[2]):
            return extent
    except Exception:  # noqa: BLE001
        pass
    return tirx.max(tirx.min(as_expr[1], as_expr[2] - as_expr[0]), 0)


def _full_after(tile: Any, position: int) -> bool:
    """Whether ``tile`` covers every buffer dimension after ``position`` entirely (constant extents)
    and lies inside the buffer in dimension ``position``: its elements from there on are one
    contiguous run of the buffer."""
    for q, (start, extent, dim) in enumerate(zip(tile.starts, tile.extents, tile.shape)):
        s, e, d = static_int(start), static_int(extent), static_int(dim)
        if q < position:
            continue
        if None in (s, e, d) or s < 0 or s + e > d or (q > position and (s != 0 or e != d)):
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


def bulk_rows(op: str, operands: Any, d: Any, v: Any, order: str, loc: str) -> bool:
    """Emit ``d += v`` (tiles of the same extents) as bulk reductions; False (nothing emitted) when
    the bulk unit cannot do it, for the caller's element-by-element form: ``v`` not in shared
    memory, ``d`` not in global memory, different dtypes, a memory order other than relaxed, no
    run along the buffers' last dimension, rows that are never a multiple of 16 bytes."""
    if v.scope not in _SHARED or d.scope != "global" or v.dtype != d.dtype or order != "relaxed":
        return False  # the bulk unit reads shared memory, writes global memory, converts nothing, is relaxed
    if is_unit(d.extents[-1]) or is_unit(v.extents[-1]) or not d.squeezed:
        return False  # the tile has no run along the buffers' last dimension
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
        count = _int32(count_d) if same else tirx.min(_int32(count_d), _int32(count_v))
    item = tvm.runtime.DataType(d.dtype).bits // 8
    if static_int(count) is not None and (static_int(count) * item) % 16:
        return False  # no row can be a multiple of 16 bytes

    from .atomic import atomic_call

    def element(at: list) -> None:
        ptr = tirx.address_of(d.buffer[tuple(d.indices(at))])
        _B.evaluate(atomic_call(d.dtype, "add_tma", order, ptr, v.buffer[tuple(v.indices(at))], loc=loc))

    def row(outer: list) -> None:
        at = outer + [tirx.IntImm("int32", 0)] * fold
        dst_row, src_row = d.indices(at), v.indices(at)
        dst = tirx.address_of(d.buffer[tuple(dst_row)])
        src = tirx.address_of(v.buffer[tuple(src_row)])
        cond = all_of([d.bounds_condition(at), v.bounds_condition(at)])

        def emit() -> None:
            with _B.If(math_call("bool", READY, dst, src, count, mode=d.dtype)):
                with _B.Then():
                    _B.evaluate(math_call("int32", ADD, dst, src, count, mode=d.dtype))
                with _B.Else():  # one atomic per element of the run
                    if fold > 1:
                        loop_nest(d.squeezed[-fold:], parallel=False, body=lambda inner: element(outer + inner))
                    else:
                        with _B.serial(0, count) as k:
                            element(outer + [k])

        guarded(cond, emit)

    _B.evaluate(math_call("int32", FENCE))
    _B.evaluate(sync_threads())

    def one_thread(_vars: list) -> None:
        loop_nest(d.squeezed[:-fold], parallel=False, body=row)
        _B.evaluate(math_call("int32", WAIT))

    loop_nest([1], parallel=True, body=one_thread)
    _B.evaluate(sync_threads())
    return True
