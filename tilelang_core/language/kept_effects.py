"""Constant folds that would drop an operand with a side effect are not made.

TVM 0.27 folds some operations to a constant when it builds them, from one constant operand
alone, and the other operand goes with the fold: ``x * 0`` and ``0 * x`` become 0, ``0 / x``,
``0 // x``, ``T.truncdiv(0, x)``, ``0 % x``, ``x % 1`` and ``T.truncmod(x, 1)`` become 0,
``tvm.tirx.all(x, False)`` becomes false and ``tvm.tirx.any(x, True)`` true (``T.And``, ``T.Or``
and Python's ``and``, ``or`` in a kernel build the node without folding). Where ``x`` has a side effect the
effect was lost without an error: ``T.atomic_add(S[0], v, return_prev=True) * 0`` of an int32
``S`` (``T.atomic_max``, ``T.atomic_or``, ... alike) never updated ``S``.

:func:`install` wraps TVM's functions behind these operators (``tvm.ir.prim._ffi_api``, which
both the Python operators of expressions and ``tvm.tirx``'s functions call): where TVM's result
is a constant and an operand it dropped calls an operator with a side effect (TVM's
``TCallEffectKind`` ``UpdateState``: the atomics, ``T.call_extern``), the operation is built
as the node itself, of the dtype TVM's result has. It computes the same value at run time (the
operation as written); :mod:`tilelang_core.lowering.atomic_values` then evaluates an atomic in
front of its statement, exactly once, after which the simplifier folds the rest as before.

Left folded: ``tvm.tirx.all(False, x)`` and ``tvm.tirx.any(True, x)``, whose ``x`` C does not
evaluate either (``&&``, ``||``). Constant folds that keep every operand (``x + 0``, ``x * 1``, ``x // 1``) and
operations without a side effect are TVM's own.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm
from tvm import tirx
from tvm.ir.prim import _ffi_api as _prim_ffi_api

from .tileops._common import collect

__all__ = ["install", "has_side_effect", "matched"]

#: TVM's function -> the node it builds. (``_OpDiv`` and ``_OpTruncDiv`` build ``Div``; TVM's
#: ``%`` is ``_OpFloorMod``.)
NODES = {
    "_OpMul": tirx.Mul,
    "_OpDiv": tirx.Div,
    "_OpTruncDiv": tirx.Div,
    "_OpTruncMod": tirx.Mod,
    "_OpFloorDiv": tirx.FloorDiv,
    "_OpFloorMod": tirx.FloorMod,
    "_OpIndexDiv": tirx.FloorDiv,
    "_OpIndexMod": tirx.FloorMod,
    "_OpAnd": tirx.And,
    "_OpOr": tirx.Or,
}

#: ``TCallEffectKind`` of an operator that updates state (``CallEffectKind.UpdateState``, also ``Opaque``).
_UPDATE_STATE = int(tirx.CallEffectKind.UpdateState.value)

_MARK = "_tilelang_kept_effects"


def has_side_effect(node: Any) -> bool:
    """Whether the TIR expression or statement ``node`` calls an operator whose effect kind is
    ``UpdateState`` (TVM's ``Opaque``, ``T.call_extern``, the atomics) or a function that is not
    an operator."""
    for call in collect(node, tvm.ir.Call):
        op = call.op
        if not isinstance(op, tvm.ir.Op):
            return True
        kind = op.get_attr("TCallEffectKind")
        if kind is not None and int(kind) == _UPDATE_STATE:
            return True
    return False


def _is_constant(value: Any) -> bool:
    if isinstance(value, tirx.Broadcast):
        value = value.value
    return isinstance(value, (bool, int, float, tirx.IntImm, tirx.FloatImm))


def _constant_value(value: Any) -> Any:
    if isinstance(value, tirx.Broadcast):
        value = value.value
    return value.value if isinstance(value, (tirx.IntImm, tirx.FloatImm)) else value


def matched(dtype: Any, value: Any) -> Any:
    """``value`` (an expression, a constant or a Python number) as an expression of ``dtype`` (a
    ``tvm.DataType``), as TVM matches the operands of a binary operation: a constant of the element
    dtype, a cast of an expression of another element dtype, a broadcast to the lanes."""
    lanes = dtype.lanes
    element = dtype.with_lanes(1)
    if _is_constant(value):
        const = tirx.const(_constant_value(value), str(element))
        return tirx.Broadcast(const, lanes) if lanes != 1 else const
    own = value.ty.dtype
    if own.with_lanes(1) != element:
        value = tirx.Cast(str(element.with_lanes(own.lanes)) if own.lanes != 1 else str(element), value)
    return tirx.Broadcast(value, lanes) if own.lanes != lanes else value


def _dropped(name: str, a: Any, b: Any) -> Optional[Any]:
    """The operand with a side effect that the fold of ``a <op> b`` dropped, or None."""
    candidates = (a,) if name in ("_OpAnd", "_OpOr") else (a, b)  # And/Or: the right one may not run
    for operand in candidates:
        if not _is_constant(operand) and tvm.ir.is_prim_expr(operand) and has_side_effect(operand):
            return operand
    return None


def _kept(name: str, ffi_op: Callable[..., Any]) -> Callable[..., Any]:
    """TVM's ``ffi_op``, building the node itself where its constant fold dropped a side effect."""
    node = NODES[name]

    def operator(a: Any, b: Any, *rest: Any) -> Any:
        result = ffi_op(a, b, *rest)
        if not _is_constant(result) or _dropped(name, a, b) is None:
            return result
        dtype = result.ty.dtype
        return node(matched(dtype, a), matched(dtype, b))

    operator.__name__ = name
    operator.__dict__.update(getattr(ffi_op, "__dict__", {}))  # the marks of the wrappers inside (their install() checks them)
    operator.__doc__ = f"TVM's {name}, not folding away an operand with a side effect (tilelang_core.language.kept_effects)"
    setattr(operator, _MARK, ffi_op)
    return operator


def install() -> None:
    """Wrap TVM's functions of :data:`NODES` (idempotent)."""
    for name in NODES:
        current = getattr(_prim_ffi_api, name)
        if getattr(current, _MARK, None) is None:
            setattr(_prim_ffi_api, name, _kept(name, current))
