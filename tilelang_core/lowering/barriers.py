"""Values hidden from TVM's simplifier until code generation.

:func:`barrier` wraps a value in a bit-level round trip (``reinterpret`` to the integer of the same
width and the other signedness, and back), which TVM's simplifier does not see through: a
constant behind it is not folded with the operation around it, an operand behind it is not
matched against the other one. :func:`StripBarriers`, the last pass of every finalize list
(passes.py), removes every such round trip again right before code generation, after the last
simplification. Used by :mod:`.float_identities` and :mod:`.kept_effects`.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
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


def _strip(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, [(tvm.ir.Call, _on_reinterpret)])
    return func if body.same_as(func.body) else func.with_body(body)


def StripBarriers() -> tvm.transform.Pass:  # noqa: N802 - a pass, named like TVM's
    """Remove the round trips of :func:`barrier`: the last pass of every finalize list (passes.py),
    right before code generation and after the last simplification. TVM's C and CUDA printers
    evaluate a reinterpret's operand ahead of its statement, outside a guard such as
    ``T.if_then_else(i < n, ...)``, and the code is plainer."""
    return tirx.transform.prim_func_pass(_strip, opt_level=0, name="tl.StripBarriers")
