"""Unsigned arithmetic that wraps around on the LLVM path, as C's unsigned arithmetic does.

TVM 0.27's LLVM code generator emits 32- and 64-bit unsigned ``+``, ``-`` and ``*`` with LLVM's
``nuw`` flag ("no unsigned wrap"): a result that wraps around is *poison*, and LLVM's optimizer
uses the promise. Kernels that rely on wraparound (hashes, random number generators, overflow
checks such as ``x + c < x``) computed wrong values without an error on target ``llvm``:
``(x + 0xFFFFFFF0) // 16`` and ``x + 0xFFFFFFF0 < x`` of a uint32 ``x`` (and the same with 64-bit
constants of a uint64 ``x``) gave other values than on target ``c``, whose C compiler wraps around.
:func:`wrapping_unsigned_arithmetic` rewrites each such operation into a form TVM emits without
the flag:

- uint32: computed in uint64, where it cannot wrap (``a - b`` as ``a + (2**32 - b)``), and
  truncated to its 32 bits;
- uint64 has no wider type: ``a + b`` and ``a - b`` choose, with a ``select``, between the
  plain operation and a form that does not wrap, by whether the result wraps; ``a * b`` is put
  together from the products of 32-bit halves (see :func:`_uint64_add`, :func:`_uint64_sub`,
  :func:`_uint64_mul`). Vector operands take the same form (a vector ``select``).

It runs on the LLVM host module right before code generation, after every simplification, so
nothing folds the rewrite away. 8- and 16-bit arithmetic is emitted without the flag already.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import dtype_of, element, with_lanes

__all__ = ["wrapping_unsigned_arithmetic"]

_UINT64_MAX = (1 << 64) - 1


def _widened_uint32(op: str, node: Any) -> Any:
    dtype = dtype_of(node)
    wide = with_lanes("uint64", dtype)
    a, b = tirx.Cast(wide, node.a), tirx.Cast(wide, node.b)
    if op == "add":
        value = tirx.Add(a, b)
    elif op == "mul":
        value = tirx.Mul(a, b)
    else:  # a - b == a + (2**32 - b) modulo 2**32, with no step that wraps in 64 bits
        value = tirx.Add(a, tirx.Sub(tirx.const(1 << 32, wide), b))
    return tirx.Cast(dtype, value)


def _uint64_add(a: Any, b: Any) -> Any:
    """``a + b`` modulo 2**64 with no step that wraps: when ``b > ~a`` the sum wraps, and is then
    ``(b - ~a) - 1``, which does not. LLVM's ``select`` takes one arm, so the other arm's poison
    never reaches the result."""
    not_a = tirx.bitwise_xor(a, _ones(a))
    return tirx.Select(b <= not_a, tirx.Add(a, b), tirx.Sub(tirx.Sub(b, not_a), _const(1, a)))


def _uint64_sub(a: Any, b: Any) -> Any:
    """``a - b`` modulo 2**64: when ``b > a`` it is ``(a + ~b) + 1``, which does not wrap."""
    not_b = tirx.bitwise_xor(b, _ones(b))
    return tirx.Select(b <= a, tirx.Sub(a, b), tirx.Add(tirx.Add(a, not_b), _const(1, a)))


def _uint64_mul(a: Any, b: Any) -> Any:
    """``a * b`` modulo 2**64 from 32-bit halves: ``lo(a) * lo(b) + (lo(a) * hi(b) + hi(a) * lo(b)) << 32``,
    each product below 2**64, the cross terms masked to 32 bits before their sum, ``<<`` flagless."""
    low, half = _const(0xFFFFFFFF, a), _const(32, a)
    a_lo, b_lo = tirx.bitwise_and(a, low), tirx.bitwise_and(b, low)
    a_hi, b_hi = tirx.shift_right(a, half), tirx.shift_right(b, half)
    cross = tirx.Add(tirx.bitwise_and(tirx.Mul(a_lo, b_hi), low), tirx.bitwise_and(tirx.Mul(a_hi, b_lo), low))
    return _uint64_add(tirx.Mul(a_lo, b_lo), tirx.shift_left(cross, half))


def _const(value: int, like: Any) -> Any:
    dtype = dtype_of(like)
    lanes = tvm.DataType(dtype).lanes
    scalar = tirx.const(value, "uint64")
    return scalar if lanes == 1 else tirx.Broadcast(scalar, lanes)


def _ones(like: Any) -> Any:
    return _const(_UINT64_MAX, like)


_UINT64 = {"add": _uint64_add, "sub": _uint64_sub, "mul": _uint64_mul}


def _rewrite(op: str):
    def rewrite(node: Any) -> Any:
        kind = element(dtype_of(node))
        if kind == "uint32":
            return _widened_uint32(op, node)
        if kind == "uint64":
            return _UINT64[op](node.a, node.b)
        return node

    return rewrite


_ENTRIES = [(tirx.Add, _rewrite("add")), (tirx.Sub, _rewrite("sub")), (tirx.Mul, _rewrite("mul"))]


def _wrap(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, _ENTRIES)
    return func if body.same_as(func.body) else func.with_body(body)


def wrapping_unsigned_arithmetic(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every uint32/uint64 ``+``, ``-``, ``*`` of its PrimFuncs in a form that wraps on LLVM."""
    return tirx.transform.prim_func_pass(_wrap, opt_level=0, name="tl.WrappingUnsignedArithmetic")(mod)
