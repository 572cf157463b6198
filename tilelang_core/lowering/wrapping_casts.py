"""Integer casts that change the sign or drop bits, in a form TVM's analyzer bounds correctly.

TVM 0.27's arithmetic analyzer gives ``T.cast(x, dtype)`` the bounds of ``x`` intersected with
the range of ``dtype`` (``ConstIntBound`` of a ``Cast``), as if every value fitted. A cast that
wraps around (C's conversion, LLVM's ``trunc``/``bitcast``, what every code generator emits)
then gets bounds it does not have, and the simplifier uses them before any code is generated,
on every target:

- unsigned to a signed type of the same or a narrower width was taken as non-negative:
  ``T.max(T.cast(X[i], "int32"), -5)`` of a uint32 ``X[i] = 2**31 + 7`` lost its ``max`` and
  gave -2147483641 instead of -5; ``T.cast(X[i], "int8") // T.int8(127)`` of a uint8 181 became a
  truncating division, 0 instead of -1 (uint64 -> int64 and ``T.clamp`` the same);
- signed to unsigned too (the intersection with ``[0, max]``): ``T.cast(X[i], "uint32") //
  2**31`` of an int32 -1 was folded to 0 instead of 1, and an int8 widened to uint32 was bounded
  by 127;
- a narrowing cast of a value whose bounds are tighter than its type (``T.cast(u + 200,
  "uint8")`` of a loop-bounded ``u``: [200, 255], although 256 is 0), seen through a later
  widening cast (``T.cast(that, "int32") >= 200`` was folded to true);
- the bounds of unsigned ``+ - * <<`` ignore wraparound (``x + 100`` of a uint8 is bounded by
  [100, 355]), which a widening cast carried into a type where the simplifier trusts them:
  ``T.cast(X[i] + T.uint8(100), "int32") >= 100`` was folded to true (false for ``X[i] = 200``),
  and the same for uint32 -> int64.

:func:`wrapping_integer_casts` rewrites each such cast, first thing in ``lower`` (before any
pass simplifies), into the same value in a form whose bounds are right:

- unsigned to signed of the same width: ``T.reinterpret`` (the analyzer knows nothing of a
  reinterpret's value: the whole range of its type);
- to fewer bits: the value masked to them first (``x & 0xFF``, whose bounds ``[0, 255]`` are
  exact), as an unsigned cast, then reinterpreted when the target is signed;
- signed to unsigned of the same or a wider width: widened in its own sign, then reinterpreted;
  to uint64 from the two 32-bit halves (see :func:`_as_unsigned`: TVM's ``NarrowDataType``
  may narrow a 64-bit signed operand under a reinterpret, which then no longer compiles);
- unsigned to a wider type: the value masked to its own bits, unless it is a load, a constant
  or a cast (whose bounds are those of the stored values), so that arithmetic that wrapped
  around is bounded by its type (NarrowDataType, which narrows 64-bit values whose bounds fit
  32 bits, then also sees the right bounds).

Casts between signed types (TIR leaves their overflow undefined), to and from ``bool``, to and
from floats, and widening casts of loaded values are left as they are.

The reinterprets are only for the analyzer. TVM's C code generators print one by loading its
operand into a variable ahead of the statement (``uint32_t v_ = X[i];``), which evaluates it even
where the expression would not (``i < n && T.cast(X[i], "int32") < 0`` read ``X[i]`` past the
end), and TVM's LLVM code generator takes a reinterpret of the constant 0 (what a simplified
operand may become) for a null pointer and fails. After every simplification, right before C,
CUDA and LLVM code generation, :func:`integer_reinterprets_as_casts` writes each reinterpret
between integers of one width back as a plain cast, the same two's-complement conversion there.
(Metal prints a reinterpret in place, as ``as_type<...>(...)``.)
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx
from tvm.ir import PrimType

from .atomics import checked_map
from .math_widening import constant, dtype_of, element, with_lanes

__all__ = ["integer_reinterprets_as_casts", "wrapping_integer_casts"]

_REINTERPRET = "tirx.reinterpret"


def _integer(dtype: str) -> Optional[tuple[bool, int]]:
    """``(signed, bits)`` of an integer (or integer vector) dtype of 8 bits or more, else None."""
    base = element(dtype)
    if not (base.startswith("int") or base.startswith("uint")):
        return None
    bits = tvm.DataType(base).bits
    return (base.startswith("int"), bits) if bits >= 8 else None


def _integer_of(expr: Any) -> Optional[tuple[bool, int]]:
    """:func:`_integer` of ``expr``'s type (None for pointers and other non-scalar types)."""
    ty = getattr(expr, "ty", None)
    return _integer(str(ty.dtype)) if isinstance(ty, PrimType) else None


def _masked(value: Any, bits: int) -> Any:
    """``value & (2**bits - 1)``: its low ``bits`` bits, with bounds ``[0, 2**bits - 1]``."""
    return tirx.BitwiseAnd(value, constant((1 << bits) - 1, dtype_of(value)))


def _is_reinterpret(node: Any) -> bool:
    return isinstance(node, tvm.ir.Call) and getattr(node.op, "name", "") == _REINTERPRET


def _bounded_by_type(value: Any) -> bool:
    """Whether the analyzer's bounds of an unsigned ``value`` lie within its type: a load, a
    constant, a cast (rewritten here) or a reinterpret. Arithmetic that may have wrapped around,
    and variables bound to it, may be bounded beyond the type."""
    return isinstance(value, (tvm.ir.TensorLoad, tirx.IntImm, tirx.Cast)) or _is_reinterpret(value)


def _as_unsigned(value: Any, to: str) -> Any:
    """A signed ``value`` converted to the unsigned type ``to`` (as wide or wider), in a form the
    analyzer bounds by ``to``'s whole range.

    Up to 32 bits: a reinterpret of the value widened in its own sign. 64 bits: the two 32-bit
    halves of the value widened to int64 (``w // 2**32`` and ``w``, each cast to int32 and
    reinterpreted as uint32) put together, so that no reinterpret has a 64-bit signed operand:
    TVM's ``NarrowDataType`` rewrites 64-bit signed casts, constants and loop variables whose
    bounds fit 32 bits into 32 bits (everywhere inside a GPU kernel), also under a reinterpret,
    whose operand must keep its width (``Y[i] = T.clz(X[i])`` of uint64 ``X``, ``Y`` then failed
    to lower for CUDA), while the casts and the division here stay right when narrowed.
    """
    bits = tvm.DataType(element(to)).bits
    from_bits = tvm.DataType(element(dtype_of(value))).bits
    if bits <= 32:
        wide = value if from_bits == bits else tirx.Cast(with_lanes(f"int{bits}", to), value)
        return tirx.reinterpret(to, wide)
    wide = value if from_bits == 64 else tirx.Cast(with_lanes("int64", to), value)

    def half(x: Any) -> Any:  # the low 32 bits of x, zero-extended to ``to``
        low = tirx.Cast(with_lanes("int32", to), x)
        return tirx.Cast(to, tirx.reinterpret(with_lanes("uint32", to), low))

    high = tirx.FloorDiv(wide, constant(1 << 32, dtype_of(wide)))
    return tirx.BitwiseOr(tirx.LShift(half(high), constant(32, to)), half(wide))


def _rewrite_cast(node: tirx.Cast) -> Any:
    to, value = dtype_of(node), node.value
    target, origin = _integer_of(node), _integer_of(value)
    if target is None or origin is None:
        return node
    (to_signed, to_bits), (from_signed, from_bits) = target, origin
    if from_signed and to_signed:
        return node  # signed -> signed: overflow is undefined in TIR, left as TVM has it
    if to_bits < from_bits:  # fewer bits: the low bits, unsigned, then the target's sign
        low = tirx.Cast(with_lanes(f"uint{to_bits}", to), _masked(value, to_bits))
        return tirx.reinterpret(to, low) if to_signed else low
    if from_signed:  # signed -> unsigned, as wide or wider
        return _as_unsigned(value, to)
    if to_bits == from_bits:  # unsigned -> signed of the same width, or the same type
        return tirx.reinterpret(to, value) if to_signed else node
    if _bounded_by_type(value):  # unsigned -> wider: a value that fits; only its bounds may be wrong
        return node
    return tirx.Cast(to, _masked(value, from_bits))


def wrapping_integer_casts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every integer cast that may wrap around in a form the analyzer bounds
    correctly (see the module docstring); run it before any pass simplifies."""
    body = checked_map(func.body, [(tirx.Cast, _rewrite_cast)])
    return func if body.same_as(func.body) else func.with_body(body)


def _as_cast(call: Any) -> Any:
    if not _is_reinterpret(call) or len(call.args) != 1:
        return call
    target, origin = _integer_of(call), _integer_of(call.args[0])
    if target is None or origin is None or target[1] != origin[1]:
        return call  # pointers, floats, different widths: a real reinterpret
    to = dtype_of(call)
    if tvm.DataType(to).lanes != tvm.DataType(dtype_of(call.args[0])).lanes:
        return call
    return tirx.Cast(to, call.args[0])


def _printable(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, [(tvm.ir.Call, _as_cast)])
    return func if body.same_as(func.body) else func.with_body(body)


def integer_reinterprets_as_casts(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every reinterpret between integers of one width (and lane count) written as
    a cast, for TVM's C, CUDA and LLVM code generators; run it after the last simplification."""
    return tirx.transform.prim_func_pass(_printable, opt_level=0, name="tl.IntegerReinterpretsAsCasts")(mod)
