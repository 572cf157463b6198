"""Values hidden from TVM's simplifier until code generation.

:func:`barrier` wraps a value in a bit-level round trip (``reinterpret`` to the integer of the same
width and the other signedness, and back), which TVM's simplifier does not see through: a
constant behind it is not folded with the operation around it, an operand behind it is not
matched against the other one. :func:`StripBarriers`, the last pass of every finalize list
(passes.py), removes every such round trip again right before code generation, after the last
simplification. Used by :mod:`.float_identities`, :mod:`.kept_effects` and
:mod:`.checked_divisions`.

A constant that was behind a barrier is in the open after it: StripBarriers also folds, wrapping
around, the integer casts of constants and the unsigned arithmetic of two constants
(``(uint32)-8``, ``0u - 8u``), which TVM refuses to fold and which LLVM's code generator would
otherwise meet when it simplifies a ``T.Let`` value.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
from .constant_casts import fold_constant_cast, wrapped
from .math_widening import dtype_of, is_float, with_lanes

__all__ = ["barrier", "can_hide", "StripBarriers"]


def _partner(dtype: str) -> str:
    """The dtype a value of ``dtype`` goes through: ``uintN`` for floats and signed integers,
    ``intN`` for unsigned integers (lanes kept)."""
    kind = tvm.DataType(dtype)
    base = "int" if kind.type_code == tvm.DataTypeCode.UINT else "uint"
    return with_lanes(f"{base}{kind.bits}", dtype)


def can_hide(value: Any) -> bool:
    """Whether :func:`barrier` can hide ``value``: a float or an integer of 8 bits or more (not a bool)."""
    kind = tvm.DataType(dtype_of(value))
    codes = (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT)
    return is_float(dtype_of(value)) or (kind.type_code in codes and kind.bits >= 8)


def barrier(value: Any) -> Any:
    """``value`` behind a bit-level round trip the simplifier does not see through."""
    dtype = dtype_of(value)
    return tirx.reinterpret(dtype, tirx.reinterpret(_partner(dtype), value))


def _on_reinterpret(call: Any) -> Any:
    if getattr(call.op, "name", "") != "tirx.reinterpret":
        return call
    inner = call.args[0]
    if not (isinstance(inner, tvm.ir.Call) and getattr(inner.op, "name", "") == "tirx.reinterpret"):
        return call
    value = inner.args[0]
    if dtype_of(value) != dtype_of(call) or dtype_of(inner) != _partner(dtype_of(call)):
        return call
    return value


_UNSIGNED_FOLDS = {tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b}


def _on_unsigned_constants(node: Any) -> Any:
    """``0u - 8u`` as ``4294967288u``: TVM stops at an unsigned result below 0 ("will cause a
    negative uint")."""
    a, b = node.a, node.b
    dtype = dtype_of(node)
    if not (isinstance(a, tirx.IntImm) and isinstance(b, tirx.IntImm)):
        return node
    kind = tvm.DataType(dtype)
    if kind.type_code != tvm.DataTypeCode.UINT or kind.lanes != 1:
        return node
    return tirx.IntImm(dtype, wrapped(_UNSIGNED_FOLDS[type(node)](int(a.value), int(b.value)), dtype))


def _strip(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    # A constant behind a barrier is in the open again: its casts and unsigned arithmetic are
    # folded here, wrapping, so that the code generators' own simplifier (which binds every
    # T.Let value) has nothing left to fold that it would refuse.
    body = checked_map(func.body, [
        (tvm.ir.Call, _on_reinterpret),
        (tirx.Cast, fold_constant_cast),  # constant_casts.py, as at the start of lowering
        (tuple(_UNSIGNED_FOLDS), _on_unsigned_constants),
    ])
    return func if body.same_as(func.body) else func.with_body(body)


def StripBarriers() -> tvm.transform.Pass:  # noqa: N802 - a pass, named like TVM's
    """Remove the round trips of :func:`barrier`: the last pass of every finalize list (passes.py),
    right before code generation and after the last simplification. TVM's C and CUDA printers
    evaluate a reinterpret's operand ahead of its statement, outside a guard such as
    ``T.if_then_else(i < n, ...)``, and the code is plainer."""
    return tirx.transform.prim_func_pass(_strip, opt_level=0, name="tl.StripBarriers")
