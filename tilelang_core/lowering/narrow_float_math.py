"""``T.truncmod`` and ``T.nextafter`` of floats narrower than 32 bits, the same on every target.

TVM 0.27 lowers neither for 16-bit or 8-bit floats on most targets:

* ``T.truncmod(x, y)`` of floats is C's ``fmod``. Of float16 it stopped ``c`` and CUDA code
  generation ("Non single or double precision floating point in Mod"), of bfloat16 every target
  ("dtype mismatch on BufferStore", "Expected floating point or integer dtype in Mod"), of float8
  CUDA. Here it is computed in float32 and converted back: ``fmod`` is exact (its result is a
  value of the operands' own format), so this is the 16-bit or 8-bit ``fmod`` itself.
* ``T.nextafter(x, y)``, the next value after ``x`` towards ``y`` in ``x``'s format. The CPU
  targets computed it in float32 and rounded back, which gives ``x`` itself (the float32
  neighbour rounds back to ``x``), a wrong value without an error; CUDA stopped with "Unresolved
  call tirx.nextafter". Here it steps on the bits of ``x``, as C's ``nextafter`` does in its
  format: NaN if either operand is NaN, ``y`` if ``x == y``, the smallest subnormal with ``y``'s
  sign from a zero, else the bit pattern one up (away from zero) or one down (towards zero); past
  the largest finite value that is infinity (float16, bfloat16, float8_e5m2). Float8 formats
  other than ``float8_e4m3fn``/``float8_e5m2`` (their NaN and zero encodings differ) are refused.

:func:`lower_narrow_float_math` runs at the start of lowering, before the targets' pipelines.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..errors import LoweringError
from .atomics import checked_map
from .math_widening import constant, with_lanes

__all__ = ["lower_narrow_float_math", "NEXTAFTER_DTYPES"]

#: Element dtypes whose nextafter steps on the bits (sign and magnitude, zero of both signs).
NEXTAFTER_DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _narrow_float(dtype: Any) -> bool:
    """Whether ``dtype``'s elements are floats of fewer than 32 bits."""
    element = dtype.with_lanes(1)
    return element.is_float and element.bits < 32  # bfloat16 and the float8/6/4 formats too


def _truncmod(mod: Any) -> Any:
    dtype = mod.ty.dtype
    wide = with_lanes("float32", str(dtype))
    return tirx.Cast(str(dtype), tirx.Mod(tirx.Cast(wide, mod.a), tirx.Cast(wide, mod.b)))


def _reinterpret(dtype: str, value: Any) -> Any:
    return tvm.ir.Call(tvm.ir.Op.get("tirx.reinterpret"), [value], ret_ty=dtype)


def _nextafter(call: Any, where: str) -> Any:
    dtype = call.ty.dtype
    element = str(dtype.with_lanes(1))
    if element not in NEXTAFTER_DTYPES:
        raise LoweringError(
            f"{where}: T.nextafter of {element} is not supported (its encoding of NaN, infinity or zero "
            f"differs from IEEE's); supported: {', '.join(NEXTAFTER_DTYPES)}, float32, float64. "
            "Cast the operands to float32 for float32's neighbour"
        )
    bits = dtype.bits
    unsigned = with_lanes(f"uint{bits}", str(dtype))
    x, y = call.args
    # y may be of another float type (T.nextafter(x_bf16, 10.0) gives a float32 10.0): it is
    # compared in its own precision, at least float32's, so a y between x and its neighbour counts
    y_dtype = y.ty.dtype
    wide = with_lanes("float64" if y_dtype.with_lanes(1).bits > 32 else "float32", str(dtype))
    xf, yf = tirx.Cast(wide, x), tirx.Cast(wide, y)  # exact for x; compared in float32 or float64 on every target
    y_own = y if str(y_dtype) == str(dtype) else tirx.Cast(str(dtype), y)
    zero = constant(0.0, wide)
    x_bits = _reinterpret(unsigned, x)
    one = constant(1, unsigned)
    away = tirx.EQ(tirx.GT(yf, xf), tirx.GT(xf, zero))  # towards y is away from zero
    step = tirx.Select(away, tirx.Add(x_bits, one), tirx.Sub(x_bits, one))
    # from a zero x (y is not zero then): the smallest subnormal with y's sign; the sign is read
    # by a comparison, not from y's bits (a bfloat16 constant's bits stopped LLVM: "bitcast float to i16")
    sign = tirx.Select(tirx.LT(yf, zero), constant(1 << (bits - 1), unsigned), constant(0, unsigned))
    from_zero = tirx.bitwise_or(sign, one)
    nan = tirx.Or(tirx.NE(xf, xf), tirx.NE(yf, yf))
    result = tirx.Select(tirx.EQ(xf, zero), _reinterpret(str(dtype), from_zero), _reinterpret(str(dtype), step))
    result = tirx.Select(tirx.EQ(xf, yf), y_own, result)
    return tirx.Select(nan, tirx.Cast(str(dtype), tirx.Add(xf, yf)), result)


def lower_narrow_float_math(func: tirx.PrimFunc, location: str) -> tirx.PrimFunc:
    """``func`` with ``truncmod`` and ``nextafter`` of floats narrower than 32 bits rewritten.

    :raises LoweringError: ``T.nextafter`` of a float8 format other than those of :data:`NEXTAFTER_DTYPES`.
    """
    where = f"{location}: kernel '{func.attrs.get('global_symbol', 'main') if func.attrs else 'main'}'"
    changed: list = []

    def on_mod(mod: Any) -> Any:
        if not _narrow_float(mod.ty.dtype):
            return mod
        changed.append(mod)
        return _truncmod(mod)

    def on_call(call: Any) -> Any:
        if getattr(call.op, "name", None) != "tirx.nextafter" or not _narrow_float(call.ty.dtype):
            return call
        changed.append(call)
        return _nextafter(call, where)

    body = checked_map(func.body, [(tirx.Mod, on_mod), (tvm.ir.Call, on_call)])
    return func.with_body(body) if changed else func
