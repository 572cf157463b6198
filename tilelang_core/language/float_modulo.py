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
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["install", "float_floormod"]

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
    from tvm import tirx
    from tvm.ir.prim import _ffi_api

    trunc = _ffi_api._OpTruncMod(a, b, span)  # both operands in one dtype (TVM folds no float Mod)
    if not isinstance(trunc, tirx.Mod):
        return trunc
    dtype = str(trunc.ty.dtype)
    if trunc.ty.dtype.bits < 32:  # float16/bfloat16/float8: in float32, rounded once at the end
        wide = dtype.replace(dtype.split("x")[0], "float32")
        return tirx.Cast(dtype, float_floormod(tirx.Cast(wide, trunc.a), tirx.Cast(wide, trunc.b)))
    zero = tirx.const(0, dtype.split("x")[0])
    if "x" in dtype:
        zero = tirx.Broadcast(zero, trunc.ty.dtype.lanes)
    r, y = trunc, trunc.b  # TVM's own floormod of integers repeats its operands too; CSE merges them
    differs = tirx.NE(tirx.LT(r, zero), tirx.LT(y, zero))
    return tirx.Select(tirx.And(tirx.NE(r, zero), differs), tirx.Add(r, y), r)


def _floormod(ffi_floormod: Callable[..., Any]) -> Callable[..., Any]:
    def floormod(a: Any, b: Any, *rest: Any) -> Any:
        if _is_float(a) or _is_float(b):
            return float_floormod(a, b, *rest)
        return ffi_floormod(a, b, *rest)

    floormod.__name__ = "_OpFloorMod"
    setattr(floormod, _MARK, ffi_floormod)
    return floormod


def install() -> None:
    """Wrap TVM's ``_OpFloorMod`` (behind ``%`` and ``T.floormod``) for float operands (idempotent)."""
    from tvm.ir.prim import _ffi_api

    if getattr(_ffi_api._OpFloorMod, _MARK, None) is None:
        _ffi_api._OpFloorMod = _floormod(_ffi_api._OpFloorMod)
