"""Packed two-lane helpers (``T.add2`` & co.) and ``T.extract_lane``.

TVM 0.27 expresses vector dtypes (``float16x2``, ``float32x2``, ``bfloat16x2``, ...; the dtype
values ``T.float16x2`` & co. are in :mod:`tilelang_core.language.dtypes`) in TIR, and
its LLVM and CUDA code generators lower them; its C code generator does not (it prints
OpenCL-style vector syntax), so kernels with vector values are refused for target ``c`` with a
clear error (:mod:`tilelang_core.lowering.intrinsics`). The helpers are plain TIR vector
arithmetic, so every target that has vectors runs them (CUDA: ``half2``/``__nv_bfloat162``
arithmetic, LLVM: vector instructions).
"""

from __future__ import annotations

from numbers import Integral, Number
from typing import Any

import tvm
from tvm import tirx

from ...errors import LoweringError
from ._common import OperandTypeError, fail


class VectorShapeError(LoweringError):
    """A vector operand of the wrong shape (a ``ValueError``)."""


class LaneIndexError(LoweringError, IndexError):
    """A lane index outside the vector (also an ``IndexError``)."""

PACKED_X2_DTYPES = ("bfloat16x2", "float16x2", "float32x2")


def _operand(value: Any) -> Any:
    value = getattr(value, "scalar", value)
    if isinstance(value, Number) and not isinstance(value, bool):
        return tirx.const(value)
    return value


def _packed(name: str, *args: Any) -> list:
    values = [_operand(a) for a in args]
    for v in values:
        if not isinstance(v, tvm.ir.Expr) or not hasattr(v, "ty"):
            fail(f"T.{name}", values, f"Expected PrimExpr, got {type(v).__name__}: {v}", OperandTypeError)
        if str(v.ty.dtype) not in PACKED_X2_DTYPES:
            fail(f"T.{name}", values, f"Expected dtype in {list(PACKED_X2_DTYPES)}, got '{v.ty.dtype}'")
    if len({str(v.ty.dtype) for v in values}) > 1:
        fail(f"T.{name}", values, f"Expected all packed x2 arguments to have the same dtype, got {[str(v.ty.dtype) for v in values]}")
    return values


def add2(x: Any, y: Any) -> Any:
    """Lane-wise ``x + y`` of two float32x2 / float16x2 / bfloat16x2 values."""
    a, b = _packed("add2", x, y)
    return a + b


def sub2(x: Any, y: Any) -> Any:
    """Lane-wise ``x - y`` (packed x2 dtypes)."""
    a, b = _packed("sub2", x, y)
    return a - b


def mul2(x: Any, y: Any) -> Any:
    """Lane-wise ``x * y`` (packed x2 dtypes)."""
    a, b = _packed("mul2", x, y)
    return a * b


def fma2(x: Any, y: Any, z: Any) -> Any:
    """Lane-wise ``x * y + z`` (packed x2 dtypes)."""
    a, b, c = _packed("fma2", x, y, z)
    return a * b + c


def max2(x: Any, y: Any) -> Any:
    """Lane-wise maximum (packed x2 dtypes)."""
    a, b = _packed("max2", x, y)
    return tirx.max(a, b)


def min2(x: Any, y: Any) -> Any:
    """Lane-wise minimum (packed x2 dtypes)."""
    a, b = _packed("min2", x, y)
    return tirx.min(a, b)


def abs2(x: Any) -> Any:
    """Lane-wise absolute value (packed x2 dtypes)."""
    (a,) = _packed("abs2", x)
    zero = tirx.Broadcast(tirx.FloatImm(str(tvm.runtime.DataType(str(a.ty.dtype)).with_lanes(1)), 0.0), 2)
    return tirx.Select(a < zero, -a, a)


def extract_lane(vector: Any, lane: Any) -> Any:
    """Lane ``lane`` (a compile-time int) of a vector value, as a scalar (``tirx.Shuffle``)."""
    vector = getattr(vector, "scalar", vector)
    if not isinstance(vector, tvm.ir.Expr) or not hasattr(vector, "ty"):
        raise OperandTypeError(f"T.extract_lane expects a PrimExpr vector, got {type(vector).__name__}")
    lanes = tvm.runtime.DataType(str(vector.ty.dtype)).lanes
    if lanes <= 1:
        raise VectorShapeError(f"T.extract_lane expects a vector expression, got the scalar {vector.ty.dtype}")
    if isinstance(lane, tirx.IntImm):
        lane = int(lane.value)
    if isinstance(lane, bool) or not isinstance(lane, Integral):
        raise OperandTypeError(f"T.extract_lane needs a compile-time integer lane, got {lane!r}")
    if not 0 <= lane < lanes:
        raise LaneIndexError(f"T.extract_lane: lane {lane} is out of bounds for the {lanes}-lane {vector.ty.dtype}")
    return tirx.Shuffle([vector], [tirx.IntImm("int32", int(lane))])
