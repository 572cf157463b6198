"""Operands widened to what TVM's math rules take: the shared helpers of cpu_math and gpu_math.

* :func:`widened_unsigned`: an integer as unsigned of its own width, zero-extended to 32 or 64
  bits (TVM's ``popcount``/``clz`` rules take those widths only), so a count of the wide value is
  the count of the integer's own bits;
* :func:`in_float32`: a math call of 16-bit floats (``float16``, ``bfloat16``) with those operands
  and its result in float32 (the caller rounds the result back). Every 16-bit value is a float32
  value, so the function is as accurate as its float32 version.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm
from tvm import tirx

__all__ = ["HALF", "computed_in_float32", "constant", "dtype_of", "element", "has_half_operand", "in_float32", "is_float", "widened_clz",
           "widened_unsigned", "with_lanes"]

#: The 16-bit float dtypes whose math is computed in float32 where a target has no rule for them.
HALF = ("float16", "bfloat16")


def dtype_of(expr: Any) -> str:
    """``expr``'s dtype as a string (``"float16x4"`` for vectors)."""
    return str(expr.ty.dtype)


def is_float(dtype: str) -> bool:
    """Whether ``dtype``'s elements are floating point (``float*``, ``bfloat16``; vectors too)."""
    return tvm.DataType(dtype).type_code in (tvm.DataTypeCode.FLOAT, tvm.DataTypeCode.BFLOAT)


def element(dtype: str) -> str:
    """The element dtype of a (vector) dtype."""
    return str(tvm.DataType(dtype).with_lanes(1)) if "x" in dtype else dtype


def with_lanes(base: str, like: str) -> str:
    """``base`` with the lanes of the dtype ``like``."""
    lanes = tvm.DataType(like).lanes
    return base if lanes == 1 else f"{base}x{lanes}"


def constant(value: Any, dtype: str) -> Any:
    """``value`` as a constant of ``dtype`` (a broadcast for vector dtypes)."""
    scalar = tirx.const(value, element(dtype))
    lanes = tvm.DataType(dtype).lanes
    return scalar if lanes == 1 else tirx.Broadcast(scalar, lanes)


def in_float32(call: Any) -> Any:
    """``call`` of a 16-bit float math function with its 16-bit operands and result in float32."""
    args = [tirx.Cast(with_lanes("float32", dtype_of(a)), a) if element(dtype_of(a)) in HALF else a
            for a in call.args]
    ret = dtype_of(call)
    return tvm.ir.Call(call.op, args, ret_ty=with_lanes("float32", ret) if element(ret) in HALF else ret)


def has_half_operand(call: Any) -> bool:
    """Whether a call has a 16-bit float (or 16-bit float vector) operand."""
    return any(element(dtype_of(a)) in HALF for a in call.args)


def computed_in_float32(call: Any, rule: Optional[Callable[[Any], Any]] = None) -> Any:
    """``call`` (with 16-bit float operands) computed in float32, ``rule`` applied to the float32
    call, and the result rounded back to its 16-bit dtype."""
    ret = dtype_of(call)
    widened = in_float32(call)
    if rule is not None:
        widened = rule(widened)
    return tirx.Cast(ret, widened) if element(ret) in HALF else widened


def widened_unsigned(x: Any) -> tuple[Any, int, int]:
    """``x`` as an unsigned int of its own width widened to 32 or 64 bits; its width; the wide width."""
    dtype = dtype_of(x)
    bits = tvm.DataType(dtype).bits
    wide = 64 if bits > 32 else 32
    value = tirx.Cast(f"uint{bits}", x) if dtype.startswith("int") else x
    return (tirx.Cast(f"uint{wide}", value) if bits != wide else value), bits, wide


def widened_clz(call: Any) -> Any:
    """The int32 ``clz`` of ``call``'s operand, counted on :func:`widened_unsigned` of it minus the
    extra bits, so that it counts the operand's own bits (``clz(0)`` as the wide count of 0, less them)."""
    value, bits, wide = widened_unsigned(call.args[0])
    count = tirx.Cast("int32", tvm.ir.Call(call.op, [value], ret_ty=dtype_of(value)))
    return count - tirx.IntImm("int32", wide - bits) if bits != wide else count
