"""Casts of integer constants, folded with C's wraparound before TVM's simplifier sees them.

TVM 0.27 folds a cast of a constant by making a constant of the new type from the *same* value,
and refuses values outside that type: ``T.cast(T.int16(-5), "uint32")`` stopped lowering with
"cannot make uint from negative value -5", ``T.cast(T.uint16(65535), "uint8")`` with "Literal
value 65535 exceeds maximum of uint8", on every target. A conversion between integer types keeps
the value modulo ``2**bits`` of the new type (two's complement for signed types), which is what C,
CUDA and LLVM do and what such a cast means in a kernel (masks, hash constants, wrapped offsets).
:func:`fold_constant_casts` replaces each cast of an integer constant to an integer type by the
constant that conversion gives, innermost first, at the start of lowering. Casts of non-constant
values, and to or from other types, are left to the pipeline.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map

__all__ = ["fold_constant_casts", "wrapped"]


def wrapped(value: int, dtype: str) -> int:
    """``value`` converted to the integer dtype ``dtype`` (``int8`` ... ``uint64``): reduced modulo
    ``2**bits``, then read as two's complement for signed types."""
    t = tvm.DataType(dtype)
    bits = t.bits
    value &= (1 << bits) - 1
    if t.type_code == tvm.DataTypeCode.INT and value >> (bits - 1):
        value -= 1 << bits
    return value


def _is_int(dtype: str) -> bool:
    t = tvm.DataType(dtype)
    return t.lanes == 1 and t.bits > 1 and t.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT)


def _on_cast(cast: Any) -> Any:
    value = cast.value
    target = str(cast.ty.dtype)
    if not isinstance(value, tirx.IntImm) or not _is_int(target) or not _is_int(str(value.ty.dtype)):
        return cast
    return tirx.IntImm(target, wrapped(int(value.value), target))


def fold_constant_casts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every integer-to-integer cast of an integer constant folded (see module doc)."""
    body = checked_map(func.body, [(tirx.Cast, _on_cast)])
    return func if body.same_as(func.body) else func.with_body(body)
