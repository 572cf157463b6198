"""Integer shifts by an amount outside ``0 .. width - 1`` get one value on every target.

``x << n`` and ``x >> n`` with ``n`` negative or at least the width of ``x``'s type are undefined
in C, CUDA C and LLVM (``shl``/``ashr``/``lshr`` give poison), and each target computed something
else: x86's scalar shift uses ``n`` modulo 32 or 64, its vector shifts (AVX2 ``vpsllvd``, what
``-O3`` makes of a C loop) give 0, PTX's ``shl``/``shr`` clamp ``n`` to the width, and an 8- or
16-bit shift is computed in 32 bits. A differential fuzz pass found ``x << 32`` of an int32 3
giving 0 on ``c`` (GCC vectorized the loop) and 3 on ``llvm`` (32 mod 32).

Here every shift whose amount is not a constant in range is defined as torch's
``bitwise_left_shift``/``bitwise_right_shift`` (and CUDA's hardware) compute it: the amount is
read as unsigned (a negative amount is a large one), ``x << n`` is 0 for ``n >= width``, ``x >> n``
of an unsigned or non-negative ``x`` is 0 and of a negative signed ``x`` is -1:

* ``x << n``  ->  ``select(unsigned(n) < width, x << n, 0)``
* ``x >> n`` unsigned  ->  ``select(unsigned(n) < width, x >> n, 0)``
* ``x >> n`` signed  ->  ``x >> select(unsigned(n) < width, n, width - 1)``

A constant amount in range is left as it is (shifts by constants, the common case, cost
nothing); TVM's simplifier removes the select where it can prove the amount in range
(``n & 7``, a bounded loop variable). An operand with a side effect (an atomic, a
``T.call_extern``) is bound to a ``let`` first, so it is evaluated exactly once. Runs before the
first ``StmtSimplify`` of every family (``passes.py``), on scalar code (before ``VectorizeLoop``).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..language.kept_effects import has_side_effect
from .atomics import checked_map
from .math_widening import dtype_of

__all__ = ["DefinedShifts", "define_shifts"]


def _int_info(dtype: str):
    """(bits, signed) of a scalar integer dtype, else None."""
    t = tvm.DataType(dtype)
    if t.lanes != 1 or t.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) or t.bits == 1:
        return None
    return t.bits, t.type_code == tvm.DataTypeCode.INT


def _bound(value: Any, name: str, body) -> Any:
    """``body(v)`` with ``v`` = ``value``, through a ``let`` when ``value`` has a side effect."""
    if not has_side_effect(value):
        return body(value)
    var = tirx.Var(name, dtype_of(value))
    return tirx.Let(var, value, body(var))


def _in_range(amount: Any, bits: int) -> Any:
    """Whether ``amount`` read as unsigned is below ``bits``: ``0 <= amount < bits`` in the amount's
    own type (a form TVM's simplifier proves from loop bounds, ``j * 4`` of ``j < 8``; C compilers
    make it one unsigned compare)."""
    adtype = dtype_of(amount)
    limit = tirx.LT(amount, tirx.IntImm(adtype, bits))
    if adtype.startswith("uint"):
        return limit
    return tirx.And(tirx.GE(amount, tirx.IntImm(adtype, 0)), limit)


def _clamped(amount: Any, bits: int) -> Any:
    """``amount`` where it is in range, else ``bits - 1`` (a signed right shift's sign fill)."""
    return tirx.Select(_in_range(amount, bits), amount, tirx.IntImm(dtype_of(amount), bits - 1))


def _constant(amount: Any):
    return int(amount.value) if isinstance(amount, tirx.IntImm) else None


def _shift(node: Any, left: bool) -> Any:
    dtype = dtype_of(node)
    info = _int_info(dtype)
    if info is None:
        return node
    bits, signed = info
    const = _constant(node.b)
    adtype = dtype_of(node.b)
    if const is not None and _int_info(adtype) is not None:
        if adtype.startswith("uint"):
            const &= (1 << _int_info(adtype)[0]) - 1
        if 0 <= const < bits:
            return node
    kind = tirx.LShift if left else tirx.RShift
    zero = tirx.IntImm(dtype, 0)

    def shifted(a):
        def with_amount(n):
            if left or not signed:
                return tirx.Select(_in_range(n, bits), kind(a, n), zero)
            return kind(a, _clamped(n, bits))

        return _bound(node.b, "shift_amount", with_amount)

    return _bound(node.a, "shifted", shifted)


def define_shifts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every integer shift by a possibly out-of-range amount defined (module docstring)."""
    body = checked_map(func.body, [(tirx.LShift, lambda n: _shift(n, True)), (tirx.RShift, lambda n: _shift(n, False))])
    return func if body.same_as(func.body) else func.with_body(body)


def DefinedShifts() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass defining shifts by amounts outside ``0 .. width - 1`` (module docstring)."""
    return tirx.transform.prim_func_pass(lambda f, m, c: define_shifts(f), opt_level=0, name="tl.DefinedShifts")
