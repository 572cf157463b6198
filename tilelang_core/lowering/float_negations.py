"""``not`` of a float comparison keeps its meaning for NaN.

TVM's simplifier rewrites ``not (a < b)`` to ``a >= b`` (and the other ordered comparisons the
same way, through ``and``/``or`` by De Morgan's laws), which holds for integers but not for
floats: with a NaN operand ``a < b`` and ``a >= b`` are both false, so ``not (a < b)`` is true and
``a >= b`` is not. ``if not (A[i] < B[i])``, the usual NaN-aware test, took the other branch for
every NaN on every target, without an error.

:func:`keep_float_negations` runs first in the frontend, before any simplification, and writes
each such negation out: ``not (a < b)`` becomes ``a >= b or isnan(a) or isnan(b)``, and a ``not``
over ``and``/``or`` is pushed down to the comparisons first. Negations of ``==``, ``!=`` and of
integer comparisons are left as they are (the rewrite is exact for them).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from .math_widening import dtype_of, is_float

__all__ = ["keep_float_negations"]

#: An ordered comparison and the one that its negation is for non-NaN operands.
_FLIP = {tirx.LT: tirx.GE, tirx.LE: tirx.GT, tirx.GT: tirx.LE, tirx.GE: tirx.LT}


def _negate(node: Any) -> Any:
    """An expression that is true exactly when ``node`` is false, under IEEE 754 comparisons."""
    if isinstance(node, tirx.And):
        return tirx.Or(_negate(node.a), _negate(node.b))
    if isinstance(node, tirx.Or):
        return tirx.And(_negate(node.a), _negate(node.b))
    if isinstance(node, tirx.Not):
        return node.a
    flip = _FLIP.get(type(node))
    if flip is not None and is_float(dtype_of(node.a)):
        return tirx.Or(tirx.Or(flip(node.a, node.b), tirx.isnan(node.a)), tirx.isnan(node.b))
    return tirx.Not(node)


def _has_float_comparison(node: Any) -> bool:
    found: list = []

    def on_compare(cmp: Any) -> Any:
        if is_float(dtype_of(cmp.a)):
            found.append(cmp)
        return cmp

    tvm_ffi.structural_map(node, [(kind, on_compare) for kind in _FLIP])
    return bool(found)


def _on_not(node: Any) -> Any:
    return _negate(node.a) if _has_float_comparison(node.a) else node


def keep_float_negations(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every ``not`` over an ordered float comparison written out for NaN."""
    body = tvm_ffi.structural_map(func.body, [(tirx.Not, _on_not)])
    return func if body.same_as(func.body) else func.with_body(body)
