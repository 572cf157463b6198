"""``T.pow``, ``T.isnan``, ``T.isinf`` and ``T.isfinite`` of bfloat16 values (and the classifiers of vectors).

TVM 0.27 refuses these four for bfloat16 when the kernel is defined ("power only applies to
float", "Data type T.bfloat16 not supported for isnan op"), although it computes the same
functions of float16 values (``isnan`` of a float16 is ``isnan`` of its float32 value). Upstream
TileLang computes them. :func:`install` wraps TVM's four functions so that a bfloat16 operand is
widened to float32 first (exact: every bfloat16 value is a float32 value): the classifiers give
the same answer, and ``pow`` is computed in float32 and rounded back to bfloat16 when its result
would have been bfloat16, as the CPU and GPU code generators compute 16-bit math anyway. Other
dtypes go to TVM unchanged. See docs/compatibility.md ("Where TVM 0.27 is mended").

``T.isinf`` and ``T.isfinite`` of a float *vector* (a ``T.Ramp`` load, ``float32x4``) stopped with
TVM's "Check failed: dtype.lanes() == 1" (its infinity constant is a scalar); they are computed
here per lane, ``|x| == inf`` against a broadcast infinity, as ``T.isnan`` of a vector already was.
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import tirx
from tvm.tirx import _ffi_api as _tirx_ffi_api

__all__ = ["install"]

_WRAPPED_MARK = "__tilelang_bfloat16_wrapped__"


def _is_bfloat16(value: Any) -> bool:
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    return dtype is not None and str(dtype).split("x")[0] == "bfloat16"


def _widened(value: Any) -> Any:
    dtype = str(value.ty.dtype)
    lanes = dtype[len("bfloat16"):]
    return tirx.Cast("float32" + lanes, value)


#: The float dtypes whose vector ``isinf``/``isfinite`` are computed here (bfloat16 is widened first;
#: the narrower floats go to TVM, which computes them as it computes their scalars).
_VECTOR_CLASSIFIED = ("float16", "float32", "float64")


def _float_lanes(value: Any) -> int:
    """The lane count of a vector expression of :data:`_VECTOR_CLASSIFIED` (``float32x4``: 4), else 1."""
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    if dtype is None:
        return 1
    dtype = tvm.runtime.DataType(str(dtype))
    return dtype.lanes if str(dtype.with_lanes(1)) in _VECTOR_CLASSIFIED else 1


def _vector_isinf(x: Any, lanes: int) -> Any:
    """``isinf`` of each lane of the float vector ``x`` of ``lanes`` lanes: ``|x| == inf`` (a NaN lane
    compares false)."""
    scalar = str(tvm.runtime.DataType(str(x.ty.dtype)).with_lanes(1))
    return tirx.EQ(tirx.abs(x), tirx.Broadcast(tirx.const(float("inf"), scalar), lanes))


def _classifier(ffi_function: Callable[..., Any], name: str) -> Callable[..., Any]:
    def classify(x: Any, *rest: Any) -> Any:
        x = _widened(x) if _is_bfloat16(x) else x
        lanes = 1 if name == "isnan" else _float_lanes(x)
        if lanes > 1:
            # TVM builds isinf (and isfinite from it) of one value only: "Check failed: dtype.lanes() == 1"
            inf = _vector_isinf(x, lanes)
            return inf if name == "isinf" else tirx.Not(tirx.Or(inf, _tirx_ffi_api.isnan(x, None)))
        return ffi_function(x, *rest)

    return classify


def _pow(ffi_function: Callable[..., Any]) -> Callable[..., Any]:
    def power(x: Any, y: Any, *rest: Any) -> Any:
        if not (_is_bfloat16(x) or _is_bfloat16(y)):
            return ffi_function(x, y, *rest)
        # the result is bfloat16 unless the other operand is a wider float expression
        other = y if _is_bfloat16(x) else x
        narrow = _is_bfloat16(other) or getattr(other, "ty", None) is None
        result = ffi_function(_widened(x) if _is_bfloat16(x) else x, _widened(y) if _is_bfloat16(y) else y, *rest)
        if narrow:
            lanes = str((x if _is_bfloat16(x) else y).ty.dtype)[len("bfloat16"):]
            return tirx.Cast("bfloat16" + lanes, result)
        return result

    return power


def install() -> None:
    """Wrap TVM's ``_OpPow``, ``isnan``, ``isinf`` and ``isfinite`` in ``tvm.tirx._ffi_api`` (idempotent)."""
    for name, wrapper in (("_OpPow", _pow), ("isnan", _classifier), ("isinf", _classifier), ("isfinite", _classifier)):
        current = getattr(_tirx_ffi_api, name)
        if getattr(current, _WRAPPED_MARK, None) is None:
            wrapped = wrapper(current) if wrapper is _pow else wrapper(current, name)
            wrapped.__name__ = name
            wrapped.__doc__ = f"TVM's {name}, bfloat16 operands widened to float32 (tilelang_core.language.bfloat16_math)"
            setattr(wrapped, _WRAPPED_MARK, current)
            setattr(_tirx_ffi_api, name, wrapped)
