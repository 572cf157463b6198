"""Atomic operators: ``T.atomic_add/max/min/or/and/xor``, ``T.atomic_load/store``,
``T.atomic_addx2/x4``.

Every element update becomes one *atomic marker call* (see :func:`atomic_call`), an expression
whose value is the element's value before the update. The lowering pipeline turns each marker
into a real atomic of the target (:mod:`tilelang_core.lowering.atomics`): C11/GCC ``__atomic``
builtins in C sources, ``atomicrmw``/``cmpxchg`` in LLVM modules, ``atomicAdd``-style calls in
CUDA. So the blocks of a CPU kernel with atomics run in parallel like any other kernel.

Forms (as in TileLang):

- *element*: ``T.atomic_add(C[i], v)`` with a scalar ``v``. Returns the marker expression; used
  as a statement it is evaluated for its effect, ``P[i] = T.atomic_add(C[0], v, return_prev=True)``
  reads the previous value.
- *tile*: ``T.atomic_add(C[0:32], A_tile)`` (buffer, region or corner destination with a tile or
  scalar value): one element atomic per element, as a ``T.Parallel`` nest over the tile. Returns
  None (``return_prev`` is refused). A scalar value is read once, before any element is updated
  (:func:`_read_once`).
"""

from __future__ import annotations

from numbers import Number
from typing import Any, Optional

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as _B

from ._common import (
    as_tile,
    check_options,
    cast,
    collect,
    fail,
    guarded,
    is_buffer,
    is_float,
    location,
    loop_nest,
    every_thread_gets_here,
    per_thread,
    same_extent,
    shape_text,
    static_int,
    storage_root,
)
from . import tma_atomic
from .warp import sync_threads

#: Callee name of the atomic marker calls (``call_extern(dtype, ATOMIC_CALL, op, order, loc, ptr, *values)``).
ATOMIC_CALL = "tl.atomic"

#: dtypes every target updates atomically (add/sub/max/min, load/store).
ATOMIC_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "uint32", "int64", "uint64")
#: dtypes of the bitwise atomics (or/and/xor).
BITWISE_ATOMIC_DTYPES = ("int32", "uint32", "int64", "uint64")

#: Memory orders (C11 names) and which atomic kind accepts which.
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
_LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
_STORE_ORDERS = ("relaxed", "release", "seq_cst")
#: TileLang's numeric ids of the memory orders (accepted as well as the names).
_ORDER_IDS = dict(enumerate(MEMORY_ORDERS))


def _order(op: str, operands: Any, memory_order: Any, allowed=MEMORY_ORDERS, default: str = "relaxed") -> str:
    if memory_order is None:
        return default
    if isinstance(memory_order, int) and not isinstance(memory_order, bool) and memory_order in _ORDER_IDS:
        memory_order = _ORDER_IDS[memory_order]
    if memory_order not in allowed:
        fail(op, operands, f"{op[2:]} does not support memory_order={memory_order!r}; use one of {', '.join(allowed)}")
    return memory_order


def atomic_call(dtype: str, op: str, order: str, ptr: Any, *values: Any, loc: Optional[str] = None) -> Any:
    """The marker expression of one atomic element operation (lowered per target).

    ``op`` is ``add``, ``max``, ``min``, ``or``, ``and``, ``xor``, ``load``, ``store``; ``ptr`` is
    ``T.address_of(buffer[indices])``; the value is the element's value before the operation.
    """
    return tirx.call_extern(
        dtype,
        ATOMIC_CALL,
        tvm.ir.StringImm(op),
        tvm.ir.StringImm(order),
        tvm.ir.StringImm(loc if loc is not None else location()),
        ptr,
        *values,
    )


def _is_tile(value: Any) -> bool:
    return is_buffer(value) or type(value).__name__ == "TensorRegion"


def _scalar(op: str, operands: Any, value: Any, dtype: str) -> Any:
    if isinstance(value, bool):
        fail(op, operands, f"value must be a number or an expression of the destination's kind, got {value!r}")
    if isinstance(value, Number):
        if isinstance(value, float) and not is_float(dtype):
            fail(op, operands, f"dtype mismatch: the float {value!r} does not fit the {dtype} destination")
        return cast(value, dtype)
    vdtype = getattr(getattr(value, "ty", None), "dtype", None)
    if vdtype is None:
        fail(op, operands, f"value must be a number, an expression or a tile, got {type(value).__name__}")
    vdtype = str(vdtype)
    if tvm.runtime.DataType(vdtype).lanes != 1:
        fail(op, operands, f"value must be a scalar, got the vector {vdtype}")
    if is_float(vdtype) != is_float(dtype):
        fail(op, operands, f"dtype mismatch: value is {vdtype} but the destination is {dtype}")
    return cast(value, dtype)


def _check_dtype(op: str, operands: Any, name: str, dtype: str, allowed: tuple) -> None:
    if dtype not in allowed:
        fail(op, operands, f"dtype mismatch: no {op} for {dtype} '{name}'; use one of {', '.join(allowed)}")


def _tile_nest(extents: list, body: Any) -> None:
    """The ``T.Parallel`` nest of a tile update over ``extents``. A one-element tile
    (``T.atomic_add(C[0:1], v)``, no extent left after dropping the unit ones) is a ``T.Parallel(1)``
    loop too: on GPU targets one thread of the block does the update. As a plain statement every
    thread of the block did it (``C[0]`` grew by ``threads * v`` per block)."""
    if extents:
        loop_nest(extents, parallel=True, body=body)
    else:
        loop_nest([1], parallel=True, body=lambda _vs: body([]))


def _read_once(x: Any, d: Any) -> Any:
    """The scalar value ``x`` of a tile update of ``d``, read once before the update's loop.

    A value that reads memory or calls something (``A[0, 0]``, ``T.atomic_add(C[0], 1,
    return_prev=True)``) is stored into a one-element local buffer in front of the loop and the
    loop reads that buffer, so every element gets the value as it was before the update:
    ``T.atomic_add(A[0:8, 0:16], A[0, 0])`` re-read ``A[0, 0]`` for every element and added 1 to
    the first and 2 to the others (all-ones ``A``). Where the value reads the destination's own
    storage (the buffer, or a ``T.view``/``T.reshape`` of it or of which it is one) and other
    threads of a GPU block update it, a block barrier (``T.sync_threads()``, nothing on CPU
    targets) follows the read: every thread reads before any thread writes.
    """
    if not collect(x, (tvm.ir.TensorLoad, tvm.ir.Call)):
        return x
    slot = IRBuilder.name("atomic_value", _B.alloc_buffer((1,), d.dtype, scope="local"))
    _B.buffer_store(slot, x, [0])
    if not per_thread(d) and _reads_storage_of(x, d.buffer) and every_thread_gets_here():
        _B.evaluate(sync_threads())
    return slot[0]


def _reads_storage_of(x: Any, buffer: Any) -> bool:
    """Whether ``x`` loads from ``buffer``'s storage: the buffer itself or a ``T.view``/``T.reshape``
    of it (or ``buffer`` is such a view of the buffer ``x`` loads)."""
    root = storage_root(buffer)
    return any(storage_root(load.source).same_as(root) for load in collect(x, tvm.ir.TensorLoad))


def _rmw(kind: str, dst: Any, value: Any, memory_order: Any, return_prev: bool, use_tma: bool = False) -> Any:
    """Shared body of the read-modify-write atomics (``kind``: add, max, min, or, and, xor)."""
    op = f"T.atomic_{kind}"
    operands = (dst, value)
    allowed = BITWISE_ATOMIC_DTYPES if kind in ("or", "and", "xor") else ATOMIC_DTYPES
    check_options(op, operands, return_prev=return_prev)
    order = _order(op, operands, memory_order)
    call_op = "add_tma" if use_tma else kind
    d = as_tile(op, operands, dst, "destination")
    if use_tma:
        tma_atomic.check_dtype(op, operands, d.dtype)
    _check_dtype(op, operands, d.name, d.dtype, allowed)
    if d.kind == "element" and not _is_tile(value):
        ptr = tirx.address_of(d.buffer[tuple(d.starts)])
        return atomic_call(d.dtype, call_op, order, ptr, _scalar(op, operands, value, d.dtype))
    if return_prev:
        fail(
            op,
            operands,
            "return_prev=True needs a single-element destination such as C[i] and a scalar value; "
            "a tile update returns nothing",
        )
    if d.kind == "element":
        v = as_tile(op, operands, value, "value", allow_element=False)
        if len(v.squeezed) > len(d.shape):
            fail(op, operands, f"rank mismatch: the value tile {shape_text(v.squeezed)} has more dimensions than "
                               f"the destination '{d.name}' {shape_text(d.shape)}; give a destination region "
                               "of the value's rank")
        d = d.with_extents(v.extents if len(v.extents) <= len(d.shape) else v.squeezed)
    loc = location()
    if _is_tile(value):
        v = as_tile(op, operands, value, "value", allow_element=False)
        if len(v.squeezed) != len(d.squeezed) or not all(same_extent(a, b) for a, b in zip(v.squeezed, d.squeezed)):
            fail(
                op,
                operands,
                f"shape mismatch: the value tile has extents {shape_text(v.extents)} and the destination "
                f"{shape_text(d.extents)}",
            )
        if is_float(v.dtype) != is_float(d.dtype):
            fail(op, operands, f"dtype mismatch: value '{v.name}' is {v.dtype} but destination '{d.name}' is {d.dtype}")

        def body(vs: list) -> None:
            x = cast(v.buffer[tuple(v.indices(vs))], d.dtype)
            conds = [c for c in (d.bounds_condition(vs), v.bounds_condition(vs)) if c is not None]
            cond = conds[0] if len(conds) == 1 else (tirx.And(conds[0], conds[1]) if conds else None)
            ptr = tirx.address_of(d.buffer[tuple(d.indices(vs))])
            guarded(cond, lambda: _B.evaluate(atomic_call(d.dtype, call_op, order, ptr, x, loc=loc)))

        def per_element() -> None:
            _tile_nest(d.squeezed, body)

        if not (use_tma and tma_atomic.bulk_rows(op, operands, d, v, order, loc, per_element)):
            per_element()
        return None
    x = _read_once(_scalar(op, operands, value, d.dtype), d)

    def body_scalar(vs: list) -> None:
        ptr = tirx.address_of(d.buffer[tuple(d.indices(vs))])
        guarded(d.bounds_condition(vs), lambda: _B.evaluate(atomic_call(d.dtype, call_op, order, ptr, x, loc=loc)))

    _tile_nest(d.squeezed, body_scalar)
    return None


def atomic_add(
    dst: Any,
    value: Any,
    memory_order: Any = None,
    return_prev: bool = False,
    use_tma: bool = False,
    annotations: Optional[dict] = None,
) -> Any:
    """``dst += value`` as one indivisible update per element.

    ``dst`` is an element (``C[0]``) with a scalar ``value``, or a buffer/region/corner with a
    ``value`` tile of the same extents (or a scalar added to every element). Element form:
    returns the update as an expression whose value is the element before the update (read it
    with ``return_prev=True``). ``memory_order`` is a C11 order name (``"relaxed"`` default,
    ``"acquire"``, ``"release"``, ``"acq_rel"``, ``"seq_cst"``, ``"consume"``) or TileLang's id
    0-5. ``use_tma=True``: a shared-memory value tile is added into a global-memory destination
    by TMA bulk reductions on CUDA sm_90 and later (:mod:`.tma_atomic`); refused when lowering for
    an earlier CUDA architecture or a CPU target. ``annotations`` is accepted and ignored.

    dtypes: float16, bfloat16, float32, float64, (u)int32, (u)int64 on every target; with
    ``use_tma=True`` float16, bfloat16, float32, int32, uint32, uint64.

    :raises LoweringError: dtype or shape mismatch, bad ``memory_order``, ``return_prev`` on a tile.
    :raises TmaAtomicError: ``use_tma=True`` with a dtype the bulk reduction does not add.
    """
    return _rmw("add", dst, value, memory_order, return_prev, use_tma=bool(use_tma))


def atomic_max(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False, annotations: Optional[dict] = None) -> Any:
    """``dst = max(dst, value)`` atomically (forms as :func:`atomic_add`).

    Floats follow C's ``fmax``: a NaN operand is ignored unless both are NaN.
    """
    return _rmw("max", dst, value, memory_order, return_prev)


def atomic_min(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False, annotations: Optional[dict] = None) -> Any:
    """``dst = min(dst, value)`` atomically (forms as :func:`atomic_add`; floats as C's ``fmin``)."""
    return _rmw("min", dst, value, memory_order, return_prev)


def atomic_or(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False) -> Any:
    """``dst |= value`` atomically on (u)int32/(u)int64 (forms as :func:`atomic_add`)."""
    return _rmw("or", dst, value, memory_order, return_prev)


def atomic_and(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False) -> Any:
    """``dst &= value`` atomically on (u)int32/(u)int64 (forms as :func:`atomic_add`)."""
    return _rmw("and", dst, value, memory_order, return_prev)


def atomic_xor(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False) -> Any:
    """``dst ^= value`` atomically on (u)int32/(u)int64 (forms as :func:`atomic_add`)."""
    return _rmw("xor", dst, value, memory_order, return_prev)


def _element(op: str, operands: Any, value: Any, role: str):
    t = as_tile(op, operands, value, role)
    if t.kind != "element":
        fail(op, operands, f"{role} must be a single element such as {t.name}[0], got {value}")
    return t


def atomic_load(src: Any, memory_order: Any = "seq_cst") -> Any:
    """The value of the element ``src`` (``A[i]``), read atomically with ``memory_order``
    (``relaxed``, ``consume``, ``acquire`` or ``seq_cst``, the default)."""
    op = "T.atomic_load"
    operands = (src,)
    order = _order(op, operands, memory_order, _LOAD_ORDERS, "seq_cst")
    s = _element(op, operands, src, "source")
    _check_dtype(op, operands, s.name, s.dtype, ATOMIC_DTYPES)
    return atomic_call(s.dtype, "load", order, tirx.address_of(s.buffer[tuple(s.starts)]))


def atomic_store(dst: Any, src: Any, memory_order: Any = "seq_cst") -> Any:
    """Write ``src`` (a scalar) into the element ``dst`` atomically with ``memory_order``
    (``relaxed``, ``release`` or ``seq_cst``, the default)."""
    op = "T.atomic_store"
    operands = (dst, src)
    order = _order(op, operands, memory_order, _STORE_ORDERS, "seq_cst")
    d = _element(op, operands, dst, "destination")
    _check_dtype(op, operands, d.name, d.dtype, ATOMIC_DTYPES)
    value = _scalar(op, operands, src, d.dtype)
    return atomic_call(d.dtype, "store", order, tirx.address_of(d.buffer[tuple(d.starts)]), value)


def _lanes_start(op: str, operands: Any, value: Any, role: str, lanes: int):
    """(tile, indices of the first of ``lanes`` consecutive elements along the last dimension)."""
    if type(value).__name__ == "TensorLoad" and value.indices and type(value.indices[-1]).__name__ == "Ramp":
        ramp = value.indices[-1]
        if static_int(ramp.stride) != 1 or static_int(ramp.lanes) != lanes:
            fail(op, operands, f"{role} {value}: the vector index must be T.Ramp(start, 1, {lanes})")
        t = as_tile(op, operands, value.source[tuple(list(value.indices[:-1]) + [ramp.base])], role)
        return t, list(t.starts)
    t = as_tile(op, operands, value, role)
    if t.kind == "element":
        first, last = static_int(t.starts[-1]) if t.starts else None, static_int(t.buffer.ty.shape[-1])
        name = getattr(t.buffer, "name", t.name)
        if last is not None and last < lanes:
            fail(op, operands, f"{role} {value}: '{name}' has {last} element(s) along its last dimension, but "
                 f"T.atomic_addx{lanes} reads {lanes} consecutive elements there; give a region such as "
                 f"X[..., j:j + {lanes}] (a scalar is not spread over the lanes)")
        if first is not None and last is not None and first + lanes > last:
            fail(op, operands, f"{role} {value}: the first of {lanes} consecutive elements must be at most at index "
                 f"{last - lanes} of the last dimension of '{name}' ({last}), got {first}; the update would reach "
                 "past the row")
        return t, list(t.starts)
    ext = [static_int(e) for e in t.extents]
    numel = 1
    for e in ext:
        numel = numel * e if e is not None and numel is not None else None
    if numel != lanes or any(e != 1 for e in ext[:-1]):
        fail(
            op,
            operands,
            f"{role} {t.name}{shape_text(t.extents)} must be {lanes} consecutive elements of the last dimension "
            f"(a region such as {t.name}[..., j:j + {lanes}] or the first element)",
        )
    return t, list(t.starts)


def _addxn(lanes: int, dst: Any, value: Any, return_prev: bool) -> Any:
    op = f"T.atomic_addx{lanes}"
    operands = (dst, value)
    check_options(op, operands, return_prev=return_prev)
    d, dstart = _lanes_start(op, operands, dst, "destination", lanes)
    v, vstart = _lanes_start(op, operands, value, "value", lanes)
    _check_dtype(op, operands, d.name, d.dtype, ATOMIC_DTYPES)
    if is_float(v.dtype) != is_float(d.dtype):
        fail(op, operands, f"dtype mismatch: value '{v.name}' is {v.dtype} but destination '{d.name}' is {d.dtype}")
    loc = location()
    values = [cast(v.buffer[tuple(vstart[:-1] + [vstart[-1] + k if k else vstart[-1]])], d.dtype) for k in range(lanes)]
    if return_prev:
        # One vector marker holding every lane's value: the lowering turns the store of it
        # (P[j:j+lanes] = ...) into one atomic per lane (lowering/atomics.expand_vector_prev).
        vec = tvm.runtime.DataType(d.dtype).with_lanes(lanes)
        return atomic_call(
            str(vec), f"addx{lanes}_prev", "relaxed", tirx.address_of(d.buffer[tuple(dstart)]), *values, loc=loc
        )
    for k in range(lanes):
        di = dstart[:-1] + [dstart[-1] + k if k else dstart[-1]]
        _B.evaluate(atomic_call(d.dtype, "add", "relaxed", tirx.address_of(d.buffer[tuple(di)]), values[k], loc=loc))
    return None


def atomic_addx2(dst: Any, value: Any, return_prev: bool = False) -> None:
    """Two element atomic adds: ``dst[j:j+2] += value[j:j+2]`` (each element atomic on its own).

    ``dst``/``value`` are two consecutive elements of the last dimension: a region of 2, a
    buffer of 2, or the first element. With ``return_prev=True`` (GPU targets; refused on CPU
    targets, as in TileLang) it returns the 2 previous values, to be stored into 2 consecutive
    elements (``P[j:j+2] = T.atomic_addx2(D[i:i+2], V[i:i+2], return_prev=True)``); each lane is
    still its own atomic.
    """
    return _addxn(2, dst, value, return_prev)


def atomic_addx4(dst: Any, value: Any, return_prev: bool = False) -> None:
    """Four element atomic adds (see :func:`atomic_addx2`)."""
    return _addxn(4, dst, value, return_prev)
