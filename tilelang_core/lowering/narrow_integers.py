"""8- and 16-bit integer arithmetic that wraps around in C and CUDA sources, as TIR and LLVM compute it.

TIR's integer dtypes are two's complement: a uint8/int8 ``a + b`` is modulo 2**8 (LLVM computes
``add i8``, and torch agrees). TVM 0.27's C and CUDA code generators print it as ``(a + b)``, and
C (and nvcc, which promotes the same way) computes it in ``int``: the result is never brought
back to 8 or 16 bits inside an expression. So ``(X[i] + Y[i]) >> 1`` of the uint8 values 200
and 100 gave 150 instead of 22, the overflow check ``X[i] + Y[i] < X[i]`` was always false,
``T.cast(x * x, "uint16")`` of a uint8 kept the whole product, ``~x`` was negative and ``x << 8``
kept its high bits; for int8, ``T.cast(a + b, "int32")`` of 100 and 100 gave 200 instead of -56
and ``T.abs`` of -128 gave 128; on target ``c`` (cython, ctypes, tvm_ffi) and CUDA, while
``llvm`` computed them in 8/16 bits. (A 16-bit ``a * b`` or ``a << 16`` was even signed
overflow in ``int``, undefined behaviour.)

:func:`narrow_integer_arithmetic` runs on the modules right before C and CUDA source code
generation, after every simplification (nothing folds the cast away), and writes each scalar
8/16-bit ``+``, ``-``, ``*``, ``<<`` and ``~`` as the operation on uint32 operands cast back to
its type: ``(int8_t)((uint32_t)a + (uint32_t)b)``. Unsigned 32-bit arithmetic wraps in C, and
the cast keeps the low bits (for a signed type, GCC, Clang and nvcc define the conversion as
modulo 2**bits). An operand that is itself such a narrowed result (or any uint32 value cast
down) is used unnarrowed: these operations commute with taking the low bits, so ``a + b + c`` is
narrowed once. ``-x`` is ``0 - x`` or ``(x ^ max) + 1`` (tilelang_core.language.literals), a
subtraction or an addition. Vector operations are left alone: TVM's code generators compute them lane by lane
into a variable of the narrow vector type, which wraps. ``/ % >> & | ^``, min/max and
comparisons of values in range stay in range, and take the narrowed (sign-extended) operands.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import dtype_of

__all__ = ["narrow_integer_arithmetic"]

_NARROW = ("uint8", "uint16", "int8", "int16")
_WIDE = "uint32"


def _wide(x: Any, peel: bool = True) -> Any:
    """``x`` (8 or 16 bits) as a uint32 whose low bits are ``x``: a constant of uint32; the uint32
    value of a cast down from uint32 when ``peel`` (its high bits do not reach the low ones)."""
    if isinstance(x, tirx.IntImm):
        return tirx.IntImm(_WIDE, int(x.value) & 0xFFFFFFFF)
    if peel and isinstance(x, tirx.Cast) and dtype_of(x.value) == _WIDE:
        return x.value
    return tirx.Cast(_WIDE, x)


#: bool arithmetic as LLVM computes it (and torch's ``+`` and ``*``): C promotes a bool to ``int``, so
#: ``A[i] + B[i]`` of two Trues was 2 on C and CUDA (stored as 2, compared unequal to 1) and 1 on llvm.
_BOOL = {tirx.Add: tirx.Or, tirx.Sub: tirx.NE, tirx.Mul: tirx.And}


def _binary(kind: type, peel_b: bool = True):
    def rewrite(node: Any) -> Any:
        dtype = dtype_of(node)
        if dtype == "bool" and kind in _BOOL:
            return _BOOL[kind](node.a, node.b)
        if dtype not in _NARROW:
            return node
        return tirx.Cast(dtype, kind(_wide(node.a), _wide(node.b, peel_b)))

    return rewrite


def _not(node: Any) -> Any:
    dtype = dtype_of(node)
    if dtype == "bool":
        return tirx.Not(node.a)  # ``~true`` is -2 in C, true again
    if dtype not in _NARROW:
        return node
    return tirx.Cast(dtype, tirx.BitwiseNot(_wide(node.a)))


# the shift amount is a number, not bits to keep: never peeled
_ENTRIES = [(tirx.Add, _binary(tirx.Add)), (tirx.Sub, _binary(tirx.Sub)), (tirx.Mul, _binary(tirx.Mul)),
            (tirx.LShift, _binary(tirx.LShift, peel_b=False)), (tirx.BitwiseNot, _not)]


def _narrow(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, _ENTRIES)
    return func if body.same_as(func.body) else func.with_body(body)


def narrow_integer_arithmetic(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every scalar 8/16-bit integer ``+ - * << ~`` computed in uint32 and cast back,
    for TVM's C and CUDA code generators (see the module docstring)."""
    return tirx.transform.prim_func_pass(_narrow, opt_level=0, name="tl.NarrowIntegerArithmetic")(mod)
