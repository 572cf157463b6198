"""Signed 8- and 16-bit divisions and remainders on ``llvm``, computed in 32 bits.

``MIN // -1`` of int8 (-128) or int16 (-32768) is 2**7 or 2**15, one past the type's largest
value. TVM's LLVM code generator emits ``sdiv i8``/``srem i16`` for ``//``, ``%``,
``T.floordiv``, ``T.floormod``, ``T.truncdiv`` and ``T.truncmod`` of these types, which LLVM
leaves undefined for that overflow and which x86 ran as a trapping division: the process stopped
with SIGFPE, even for ``%``, whose result (0) does not overflow. C (the ``c`` target, CUDA)
computes them in ``int`` and the store wraps, as torch does: ``-128 // -1`` is ``-128``.

:func:`WidenNarrowDivisions` runs right before ``LowerIntrin`` on every CPU path (passes.py
``_lower_intrin``; on ``c`` the casts only spell out what C does) and writes each such scalar or
vector operation as the operation on int32 operands cast back to its type, which gives C's values
on ``llvm`` too.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

__all__ = ["WidenNarrowDivisions"]

_KINDS = (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)
_NARROW_SIGNED = ("int8", "int16")


def _widened(node: Any) -> Any:
    dtype = tvm.DataType(str(node.ty.dtype))
    if str(dtype.with_lanes(1)) not in _NARROW_SIGNED:
        return node
    wide = str(tvm.DataType("int32").with_lanes(dtype.lanes)) if dtype.lanes > 1 else "int32"
    op = type(node)(tirx.Cast(wide, node.a), tirx.Cast(wide, node.b))
    return tirx.Cast(str(dtype), op)


def WidenNarrowDivisions() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """int8/int16 ``Div``, ``Mod``, ``FloorDiv`` and ``FloorMod`` computed in int32 and cast back."""

    def transform(func, mod, ctx):  # noqa: ARG001
        body = tvm_ffi.structural_map(func.body, [(kind, _widened) for kind in _KINDS])
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.WidenNarrowDivisions")
