"""Reducers: ``T.alloc_reducer``, ``T.reducer_init``, ``T.reducer_update``, ``T.finalize_reducer``.

A reducer is a per-thread accumulator of a logical shape: every thread combines the
contributions of the ``T.Parallel`` iterations it runs into its own copy (``local`` memory);
``T.finalize_reducer`` combines the copies of all the block's threads (on GPU targets through
shared memory, :mod:`tilelang_core.lowering.frontend`; on CPU targets a block has one copy).

Two spellings, as in TileLang:

- v1: ``acc = T.alloc_reducer(shape, dtype, op, replication="all")``, ``T.clear(acc)`` or
  ``T.fill``, plain updates ``acc[i] += x`` inside ``T.Parallel``, ``T.finalize_reducer(acc)``;
  afterwards every thread's copy holds the result.
- v2: ``acc = T.alloc_reducer(shape, dtype, op)``, ``T.reducer_init(acc[, init])``,
  ``T.reducer_update(acc[idx], value)`` inside ``T.Parallel``, ``T.finalize_reducer(acc, dst)``;
  ``init`` (captured when ``T.reducer_init`` runs) is combined exactly once into each result.
"""

from __future__ import annotations

from numbers import Number
from typing import Any, Optional

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from .reduce import identity  # the same start values as T.reduce_*
from ._common import OperandCheckError, as_tile, cast, check_batch, describe, fail, location, loop_nest, same_extent, shape_text

REDUCER_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_BITWISE = ("bitand", "bitor", "bitxor")
#: Callee of the finalize marker (``call_extern("int32", FINALIZE_CALL, op, loc, address_of(acc[0..]))``).
FINALIZE_CALL = "tl.reducer.finalize"
#: AttrStmt key around the store of ``T.reducer_update`` (checked to be inside a ``T.Parallel``).
UPDATE_KEY = "tl.reducer_update"


class _Reducer:
    def __init__(self, buffer: Any, op: str, version: int):
        self.buffer = buffer
        self.op = op
        self.version = version
        self.opened = False
        self.seed: Optional[Any] = None


#: Reducers of the kernels being defined (bounded: a finalized reducer leaves it).
_LIVE: list = []


def _lookup(op: str, operands: Any, buffer: Any) -> _Reducer:
    for r in _LIVE:
        if r.buffer.same_as(buffer):
            return r
    fail(op, operands, f"'{buffer}' is not a reducer (allocate it with T.alloc_reducer)")
    raise AssertionError  # unreachable


def combine(op: str, a: Any, b: Any) -> Any:
    """``op(a, b)``."""
    return {
        "sum": lambda: a + b,
        "max": lambda: tirx.max(a, b),
        "min": lambda: tirx.min(a, b),
        "bitand": lambda: tirx.bitwise_and(a, b),
        "bitor": lambda: tirx.bitwise_or(a, b),
        "bitxor": lambda: tirx.bitwise_xor(a, b),
    }[op]()


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: Optional[str] = None) -> Any:
    """A reducer of logical shape ``shape`` combining with ``op`` (sum, max, min, bitand, bitor,
    bitxor; the bitwise ops need an integer dtype). ``replication`` ("all"/"none") selects
    TileLang's v1 spelling (plain ``acc[i] += x`` updates, in-place ``T.finalize_reducer(acc)``).

    :raises LoweringError: (also an ``AssertionError``, as TileLang asserts) a bad op, dtype or
        replication.
    """
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    from ..operand_checks import check_dtype, check_extents

    check_extents("T.alloc_reducer", shape)
    dt = check_dtype("T.alloc_reducer", dtype)
    operands = (shape_text(shape), dt)
    if op not in REDUCER_OPS:
        fail("T.alloc_reducer", operands, f"op must be one of {', '.join(REDUCER_OPS)}, got {op!r}", OperandCheckError)
    if op in _BITWISE and not dt.startswith(("int", "uint", "bool")):
        fail("T.alloc_reducer", operands, f"bitwise reducer op '{op}' requires an integer dtype, got {dt}", OperandCheckError)
    if replication not in (None, "all", "none"):
        fail("T.alloc_reducer", operands, f"replication must be 'all', 'none' or None, got {replication!r}", OperandCheckError)
    buffer = _B.alloc_buffer(tuple(shape), dt, scope="local")
    _LIVE.append(_Reducer(buffer, op, 1 if replication is not None else 2))
    del _LIVE[:-64]
    return buffer


def reducer_init(reducer: Any, init: Any = None) -> None:
    """Open the reducer's epoch: every copy starts at ``op``'s identity; ``init`` (a number or an
    expression of the reducer's dtype, evaluated here) is combined once into each result."""
    op = "T.reducer_init"
    operands = (reducer,) if init is None else (reducer, init)
    r = _lookup(op, operands, getattr(reducer, "source", reducer))
    if r.opened:
        fail(op, operands, f"double T.reducer_init of '{describe(r.buffer)}' (one per T.alloc_reducer epoch)")
    dtype = str(r.buffer.ty.dtype)
    if init is not None:
        if isinstance(init, Number) and not isinstance(init, bool):
            seed = cast(init, dtype)
        else:
            vdtype = str(getattr(getattr(init, "ty", None), "dtype", ""))
            if vdtype != dtype:
                fail(op, operands, f"the init value's dtype {vdtype or type(init).__name__} does not match reducer dtype {dtype}")
            seed = init
        slot = _B.alloc_buffer((1,), dtype, scope="local")
        _B.buffer_store(slot, seed, [0])
        r.seed = slot
    r.opened = True
    t = as_tile(op, operands, r.buffer, "reducer", allow_element=False)
    loop_nest(t.squeezed or [1], parallel=False,
              body=lambda vs: _B.buffer_store(r.buffer, identity(r.op, dtype), t.indices(vs) if t.squeezed else list(t.starts)))


def reducer_update(target: Any, value: Any) -> None:
    """Contribute ``value`` to the element ``target`` (``acc[i]``) of a reducer; inside ``T.Parallel``."""
    op = "T.reducer_update"
    operands = (target, value)
    if type(target).__name__ != "TensorLoad":
        fail(op, operands, "the target must be an element acc[indices] of the reducer; the reducer cannot be read or aliased")
    r = _lookup(op, operands, target.source)
    if not r.opened:
        fail(op, operands, f"T.reducer_update before T.reducer_init of '{describe(r.buffer)}'")
    dtype = str(r.buffer.ty.dtype)
    v = cast(value, dtype) if isinstance(value, Number) else value
    if str(getattr(getattr(v, "ty", None), "dtype", dtype)) != dtype:
        v = tirx.Cast(dtype, v)
    loc = location()
    with _B.attr(tvm.ir.StringImm(loc), UPDATE_KEY, tirx.IntImm("int32", 1)):
        _B.buffer_store(r.buffer, combine(r.op, target, v), list(target.indices))


def finalize_reducer(reducer: Any, dst: Any = None, batch: int = 1, annotations: Any = None) -> None:
    """Combine the copies of all the block's threads; v1 (no ``dst``): in place, every copy holds
    the result; v2: ``dst`` (a tile of the reducer's shape) gets the result combined with ``init``
    (without ``dst``: in place, every copy holds the result combined with ``init``).

    ``batch`` (TileLang's all-reduce batching: >= 1, dividing the reducer's element count)
    does not change the result.
    """
    op = "T.finalize_reducer"
    operands = (reducer,) if dst is None else (reducer, dst)
    r = _lookup(op, operands, reducer)
    check_batch(op, operands, batch, list(r.buffer.ty.shape), describe(r.buffer))
    if r.version == 2 and not r.opened:
        name = describe(r.buffer)
        fail(op, operands, f"T.finalize_reducer before T.reducer_init of '{name}': a reducer allocated without "
             f"replication= is TileLang's v2 form; start it with T.reducer_init({name}) and update it with "
             f"T.reducer_update, or give T.alloc_reducer(..., replication='all') for plain updates started by "
             f"T.clear/T.fill")
    first = [tirx.IntImm("int32", 0)] * len(r.buffer.ty.shape)
    _B.evaluate(tirx.call_extern("int32", FINALIZE_CALL, tvm.ir.StringImm(r.op), tvm.ir.StringImm(location()),
                                 tirx.address_of(r.buffer[tuple(first)])))
    _LIVE.remove(r)
    src = as_tile(op, operands, r.buffer, "reducer", allow_element=False)
    if dst is None:
        if r.seed is not None:
            # v2 finalized in place: every copy (each thread's) combines the init into its result,
            # as a finalize into dst does. Before, the init was dropped without an error.
            seed = r.seed

            def in_place(vs: list) -> None:
                idx = src.indices(vs) if src.squeezed else list(src.starts)
                _B.buffer_store(r.buffer, combine(r.op, r.buffer[tuple(idx)], seed[0]), idx)

            loop_nest(src.squeezed or [1], parallel=False, body=in_place)
        return
    d = as_tile(op, operands, dst, "destination", allow_element=False)
    if len(d.squeezed) != len(src.squeezed) or not all(same_extent(a, b) for a, b in zip(d.squeezed, src.squeezed)):
        fail(op, operands, f"shape mismatch: the destination {shape_text(d.extents)} must have the reducer's shape {shape_text(src.extents)}")
    seed = r.seed

    def body(vs: list) -> None:
        value = r.buffer[tuple(src.indices(vs))]
        if seed is not None:
            value = combine(r.op, value, seed[0])
        _B.buffer_store(d.buffer, cast(value, d.dtype), d.indices(vs))

    loop_nest(d.squeezed or [1], parallel=True, body=(lambda vs: body([])) if not d.squeezed else body)
