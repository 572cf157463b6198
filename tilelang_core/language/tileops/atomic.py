"""``T.atomic_add``: ``dst += value`` for an element or a tile, atomically on GPU targets."""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ._common import (
    ATOMIC_ADD_KEY,
    FRAGMENT_SCOPE,
    as_tile,
    cast,
    fail,
    guarded,
    is_buffer,
    loop_nest,
    same_extent,
    shape_text,
)

#: dtypes GPU targets add atomically.
ATOMIC_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "uint32", "int64", "uint64")


def _atomic_store(buffer: Any, indices: list, value: Any) -> None:
    # The CPU frontend never marks a T.Parallel loop containing this attr '#pragma omp simd' and
    # runs the blocks of a kernel containing it serially (lowering/frontend.py).
    with _B.attr(buffer, ATOMIC_ADD_KEY, tirx.IntImm("int32", 1)):
        _B.buffer_store(buffer, buffer[tuple(indices)] + value, indices)


def atomic_add(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False) -> None:
    """``dst += value`` as one indivisible update per element.

    ``dst`` is an element (``C[0]``) with a scalar ``value``, or a buffer/region with a ``value``
    tile of the same extents (or a scalar added to every element). On GPU targets each element
    update is a hardware atomic (``atomicAdd``); on CPU targets it is a plain read-modify-write
    and a kernel containing one runs its ``T.Kernel`` blocks serially (never vectorized), so
    updates from different blocks never race. ``memory_order`` is accepted for
    TileLang compatibility (relaxed order is used); ``return_prev`` is not supported.

    :raises LoweringError: ``dst`` in local/fragment memory, a dtype without atomics, or extents
        that do not match.
    """
    operands = (dst, value)
    if return_prev:
        fail("T.atomic_add", operands, "return_prev=True is not supported; read the value separately")
    d = as_tile("T.atomic_add", operands, dst, "destination")
    if d.scope in ("local", FRAGMENT_SCOPE):
        fail(
            "T.atomic_add",
            operands,
            f"wrong scope: destination '{d.name}' is in {d.scope} memory, which only one thread sees; "
            "atomics need global or shared memory (use a plain update instead)",
        )
    if d.dtype not in ATOMIC_DTYPES:
        fail("T.atomic_add", operands, f"dtype mismatch: no atomic add for {d.dtype} '{d.name}'; use one of {', '.join(ATOMIC_DTYPES)}")
    tile_value = is_buffer(value) or type(value).__name__ == "TensorRegion"
    if d.kind == "element":
        if tile_value:
            v = as_tile("T.atomic_add", operands, value, "value", allow_element=False)
            d = d.with_extents(v.extents if len(v.extents) <= len(d.shape) else v.squeezed)
        else:
            _atomic_store(d.buffer, list(d.starts), _scalar(operands, value, d.dtype))
            return
    if tile_value:
        v = as_tile("T.atomic_add", operands, value, "value", allow_element=False)
        if len(v.squeezed) != len(d.squeezed) or not all(same_extent(a, b) for a, b in zip(v.squeezed, d.squeezed)):
            fail(
                "T.atomic_add",
                operands,
                f"shape mismatch: the value tile has extents {shape_text(v.extents)} and the destination "
                f"{shape_text(d.extents)}",
            )
        if (v.dtype.startswith(("float", "bfloat"))) != (d.dtype.startswith(("float", "bfloat"))):
            fail("T.atomic_add", operands, f"dtype mismatch: value '{v.name}' is {v.dtype} but destination '{d.name}' is {d.dtype}")

        def body(vs: list) -> None:
            x = cast(v.buffer[tuple(v.indices(vs))], d.dtype)
            conds = [c for c in (d.bounds_condition(vs), v.bounds_condition(vs)) if c is not None]
            cond = conds[0] if len(conds) == 1 else (tirx.And(conds[0], conds[1]) if conds else None)
            guarded(cond, lambda: _atomic_store(d.buffer, d.indices(vs), x))

        loop_nest(d.squeezed, parallel=True, body=body)
        return
    x = _scalar(operands, value, d.dtype)

    def body_scalar(vs: list) -> None:
        guarded(d.bounds_condition(vs), lambda: _atomic_store(d.buffer, d.indices(vs), x))

    loop_nest(d.squeezed, parallel=True, body=body_scalar)


def _scalar(operands: Any, value: Any, dtype: str) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return cast(value, dtype)
    vdtype = getattr(getattr(value, "ty", None), "dtype", None)
    if vdtype is None:
        fail("T.atomic_add", operands, f"value must be a number, an expression or a tile, got {type(value).__name__}")
    if str(vdtype).startswith(("float", "bfloat")) != dtype.startswith(("float", "bfloat")):
        fail("T.atomic_add", operands, f"dtype mismatch: value is {vdtype} but the destination is {dtype}")
    return cast(value, dtype)
