"""``%`` and ``T.floormod`` of floats: Python's floor remainder.

TVM 0.27 defines ``%`` of TIR expressions as ``floormod`` and builds ``floormod`` of integers
only: ``A[i] % B[i]`` of float tensors stopped the kernel's parse with a bare check failure
("MatchesCode(kDLInt, kDLUInt) is false"), on every target. :func:`install` makes ``floormod`` of
floats (``x % y``, ``T.floormod(x, y)``, also when one operand is an integer or a Python number,
which becomes the float's dtype as in arithmetic) the remainder Python and NumPy compute for
floats: ``r = T.truncmod(x, y)`` (C's ``fmod``: exact, with the sign of ``x``), and ``r + y`` where
``r`` is not zero and its sign differs from ``y``'s, so the result has the sign of ``y``
(``-5.5 % 2.0 == 0.5``). ``r + y`` is rounded to the dtype as every addition is (Python does the
same in float64). Differences from Python: a zero remainder keeps the sign C's ``fmod`` gives it
(that of ``x``; Python gives the sign of ``y``), and ``y == 0`` gives NaN instead of raising.
The remainder of 16-bit and 8-bit floats is computed in float32 and rounded to its dtype once at
the end: ``fmod`` is exact, and float32 holds more than twice their precision, so the one rounding
of ``r + y`` gives the correctly rounded sum. Integer ``floormod`` is TVM's.

``//`` and ``T.floordiv`` of floats (TVM 0.27 stopped them with the same bare check) are Python's
floor quotient, computed from the same ``fmod`` as Python and ``torch.div(..., rounding_mode=
"floor")`` do, so that ``x == (x // y) * y + x % y`` up to rounding: ``m = T.truncmod(x, y)``,
``d = (x - m) / y``, ``d - 1`` where ``m`` is not zero and its sign differs from ``y``'s, then
``floor(d)``, plus 1 where ``d - floor(d) > 0.5`` (``d`` is an integer up to rounding); a zero
quotient has the sign of ``x / y``. ``y == 0`` gives ``x / y`` (an infinity or NaN, as torch;
Python raises); for a constant 0 it is written without the division, which TVM cannot print.
16-bit and 8-bit floats are computed in float32 and rounded once at the end.

``/`` of a float quotient by a constant zero (``A[i] / 0.0``, ``x / T.float32(0)``; TVM 0.27 stopped
the parse with "Check failed: fb->value != 0 ... Divide by zero") is IEEE's and torch's the same
way: :func:`float_divided_by_zero`.

Both expressions repeat their operands. An operand with a side effect (an atomic's previous value,
a ``T.call_extern``) is bound once by a ``Let`` first, which lowering/atomic_values.py turns into a
statement, so ``T.atomic_add(C[0], 1.0, return_prev=True) % 7.0`` runs the atomic once.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["install", "float_divided_by_zero", "float_floormod", "float_floordiv"]

_MARK = "_tilelang_float_floormod"


def _is_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    import tvm

    if isinstance(value, (bool, int)) or not tvm.ir.is_prim_expr(value):
        return False
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    return dtype is not None and dtype.with_lanes(1).is_float


def float_floormod(a: Any, b: Any, span: Any = None) -> Any:
    """Python's floor remainder of ``a`` and ``b``, at least one of them a float (module docstring)."""
    from ..lowering.atomic_values import evaluated_once

    return evaluated_once(lambda x, y: _float_floormod(x, y, span), a, b)


def _float_floormod(a: Any, b: Any, span: Any = None) -> Any:
    from tvm import tirx
    from tvm.ir.prim import _ffi_api

    trunc = _ffi_api._OpTruncMod(a, b, span)  # both operands in one dtype (TVM folds no float Mod)
    if not isinstance(trunc, tirx.Mod):
        return trunc
    dtype = str(trunc.ty.dtype)
    if trunc.ty.dtype.bits < 32:  # float16/bfloat16/float8: in float32, rounded once at the end
        wide = dtype.replace(dtype.split("x")[0], "float32")
        return tirx.Cast(dtype, _float_floormod(tirx.Cast(wide, trunc.a), tirx.Cast(wide, trunc.b)))
    zero = tirx.const(0, dtype.split("x")[0])
    if "x" in dtype:
        zero = tirx.Broadcast(zero, trunc.ty.dtype.lanes)
    r, y = trunc, trunc.b  # TVM's own floormod of integers repeats its operands too; CSE merges them
    differs = tirx.NE(tirx.LT(r, zero), tirx.LT(y, zero))
    return tirx.Select(tirx.And(tirx.NE(r, zero), differs), tirx.Add(r, y), r)


def _constant(value: float, dtype: Any) -> Any:
    from tvm import tirx

    scalar = tirx.const(value, str(dtype).split("x")[0])
    return tirx.Broadcast(scalar, dtype.lanes) if dtype.lanes > 1 else scalar


def float_floordiv(a: Any, b: Any, span: Any = None) -> Any:
    """Python's floor quotient of ``a`` and ``b``, at least one of them a float (module docstring)."""
    from ..lowering.atomic_values import evaluated_once

    return evaluated_once(lambda x, y: _float_floordiv(x, y, span), a, b)


def _float_floordiv(a: Any, b: Any, span: Any = None) -> Any:
    from tvm import tirx
    from tvm.ir.prim import _ffi_api

    m = _ffi_api._OpTruncMod(a, b, span)  # both operands in one dtype (TVM folds no float Mod)
    if not isinstance(m, tirx.Mod):
        return tirx.floor(_ffi_api._OpDiv(a, b, span))
    x, y, ty = m.a, m.b, m.ty.dtype
    dtype = str(ty)
    if ty.bits < 32:  # float16/bfloat16/float8: in float32, rounded once at the end
        wide = dtype.replace(dtype.split("x")[0], "float32")
        wide_y = tirx.const(float(y.value), wide) if isinstance(y, tirx.FloatImm) else tirx.Cast(wide, y)
        return tirx.Cast(dtype, _float_floordiv(tirx.Cast(wide, x), wide_y))
    if isinstance(y, tirx.FloatImm) and float(y.value) == 0.0:
        return _quotient_by_zero(x, float(y.value), ty)
    zero, one, half = (_constant(v, ty) for v in (0.0, 1.0, 0.5))
    # No Let bindings: the bfloat16 legalization of TVM 0.27 leaves their values' casts raw; the
    # repeated subexpressions are merged by CSE (TVM's own integer floordiv repeats its operands too).
    quotient = tirx.Div(tirx.Sub(x, m), y)
    d = tirx.Select(tirx.And(tirx.NE(m, zero), tirx.NE(tirx.LT(m, zero), tirx.LT(y, zero))), tirx.Sub(quotient, one), quotient)
    f = tirx.floor(d)
    rounded = tirx.Select(tirx.GT(tirx.Sub(d, f), half), tirx.Add(f, one), f)
    nonzero = tirx.Select(tirx.NE(d, zero), rounded, tirx.copysign(zero, tirx.Div(x, y)))
    return tirx.Select(tirx.EQ(y, zero), tirx.Div(x, y), nonzero)


def _quotient_by_zero(x: Any, divisor: float, ty: Any) -> Any:
    """``x // 0.0`` (or ``-0.0``) as torch gives it, ``x / divisor``: an infinity of the sign of
    ``x / divisor``, NaN for a zero or NaN ``x``. Written without the division: TVM folds a
    division by the constant 0 into "Check failed: fb->value != 0 ... Divide by zero" wherever
    the expression is printed or simplified (the kernel's cache key first)."""
    import math

    from tvm import tirx

    inf = tirx.copysign(_constant(math.inf, ty), x)
    if math.copysign(1.0, divisor) < 0:
        inf = tirx.Sub(_constant(0.0, ty), inf)
    undefined = tirx.Or(tirx.EQ(x, _constant(0.0, ty)), tirx.isnan(x))
    return tirx.Select(undefined, _constant(math.nan, ty), inf)


def _one_like(zero: Any) -> Any:
    """1 of the kind of the zero divisor ``zero`` (a Python number, a constant, a broadcast)."""
    from tvm import tirx

    if isinstance(zero, tirx.Broadcast):
        return tirx.Broadcast(_one_like(zero.value), zero.lanes)
    if isinstance(zero, (tirx.IntImm, tirx.FloatImm)):
        return tirx.const(1, str(zero.ty.dtype))
    return 1.0 if isinstance(zero, float) else 1


def float_divided_by_zero(ffi_div: Callable[..., Any], a: Any, b: Any) -> Any:
    """``a / b`` of a constant zero ``b`` where the quotient is a float (``A[i] / 0.0``, an integer
    ``A[i] / 0.0``, ``x / T.float32(0)``), as IEEE and torch give it: an infinity of the sign of
    ``a / b``, NaN for a zero or NaN ``a``; None for any other division. ``ffi_div`` is TVM's
    division, which gives the quotient's dtype. TVM 0.27 stopped the kernel's parse at ``A[i] / 0.0``
    with its bare "Check failed: fb->value != 0 (0 vs. 0) : Divide by zero" (it folds every
    division by a constant 0). 16-bit and 8-bit floats are computed in float32."""
    import tvm
    from tvm import tirx

    from ..lowering.atomic_values import evaluated_once
    from .literals import zero_value

    divisor = zero_value(b)
    if divisor is None:
        return None
    probe = ffi_div(a, _one_like(b), None)  # the quotient's dtype, as TVM promotes the operands
    if not tvm.ir.is_prim_expr(probe) or not probe.ty.dtype.with_lanes(1).is_float:
        return None  # an integer division by zero: TVM's (and lowering's) handling
    ty = probe.ty.dtype
    if not tvm.ir.is_prim_expr(a):
        a = _constant(float(a), ty)
    elif a.ty.dtype != ty:
        a = tirx.Cast(str(ty), a)

    def build(x: Any) -> Any:
        if ty.bits < 32:  # float16/bfloat16/float8: in float32 (exact infinities and NaN), then back
            wide = tirx.Cast(str(ty).replace(str(ty.with_lanes(1)), "float32"), x)
            return tirx.Cast(str(ty), _quotient_by_zero(wide, divisor, wide.ty.dtype))
        return _quotient_by_zero(x, divisor, ty)

    return evaluated_once(build, a)


def _dividing_by_zero(ffi_op: Callable[..., Any]) -> Callable[..., Any]:
    """TVM's ``_OpDiv`` (behind ``/``) with a float quotient by a constant zero sent to
    :func:`float_divided_by_zero`."""

    def div(a: Any, b: Any, *rest: Any) -> Any:
        result = float_divided_by_zero(ffi_op, a, b)
        return ffi_op(a, b, *rest) if result is None else result

    div.__name__ = "_OpDiv"
    div.__doc__ = ffi_op.__doc__
    div.__dict__.update(getattr(ffi_op, "__dict__", {}))  # the marks of what it wraps (literals' install checks them)
    setattr(div, _DIV_MARK, ffi_op)
    return div


_DIV_MARK = "_tilelang_float_division_by_zero"


def _float_aware(ffi_op: Callable[..., Any], float_op: Callable[..., Any], name: str) -> Callable[..., Any]:
    """TVM's ``ffi_op`` (``_OpFloorDiv``/``_OpFloorMod``) with float operands sent to ``float_op``."""

    def op(a: Any, b: Any, *rest: Any) -> Any:
        if _is_float(a) or _is_float(b):
            return float_op(a, b, *rest)
        return ffi_op(a, b, *rest)

    op.__name__ = name
    setattr(op, _MARK, ffi_op)
    return op


def install() -> None:
    """Wrap TVM's ``_OpFloorMod`` and ``_OpFloorDiv`` (behind ``%``, ``//``, ``T.floormod`` and
    ``T.floordiv``) for float operands, and ``_OpDiv`` (``/``) for a float divided by a constant
    zero (idempotent)."""
    from tvm.ir.prim import _ffi_api

    if getattr(_ffi_api._OpFloorMod, _MARK, None) is None:
        _ffi_api._OpFloorMod = _float_aware(_ffi_api._OpFloorMod, float_floormod, "_OpFloorMod")
    if getattr(_ffi_api._OpFloorDiv, _MARK, None) is None:
        _ffi_api._OpFloorDiv = _float_aware(_ffi_api._OpFloorDiv, float_floordiv, "_OpFloorDiv")
    if getattr(_ffi_api._OpDiv, _DIV_MARK, None) is None:
        _ffi_api._OpDiv = _dividing_by_zero(_ffi_api._OpDiv)
