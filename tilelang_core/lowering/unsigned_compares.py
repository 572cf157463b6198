"""Unsigned comparisons of a value with itself plus a constant, hidden from TVM's simplifier.

TVM 0.27's canonical simplifier moves a comparison's operands to one side (``a < b`` as
``a - b < 0``) and folds the constants left over. For an unsigned ``x + 1 > x`` or ``x < x + 1``
(uint8 to uint64: the usual overflow check, valid as unsigned arithmetic wraps on every target)
that is ``0 - 1`` in the unsigned type, and TVM's constant folder stops with an internal check
("Minuend 's value is 0U and it's dtype is uint ... which will cause a negative uint"): the kernel
did not lower on any path.

:func:`guard_unsigned_compares` hides, in each unsigned ``<``, ``<=``, ``>``, ``>=`` whose operands
share a term (one operand equal to the other or to an operand of the other when that is a sum or a
difference), the right operand (the left one when the right one is a constant) behind
:func:`.barriers.barrier`: the simplifier then sees two unrelated operands, compares them as they
are, and the code computes the wrapped sum. It runs right before the first simplification of
every pass list (passes.py ``_simplifier_guards``); :func:`.barriers.StripBarriers` removes the
round trips right before code generation. Signed and float comparisons, and unsigned ones without
a shared term (``x + 3 > 2``, ``a + b > c``), are untouched.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from .atomics import checked_map
from .barriers import barrier, can_hide
from .math_widening import dtype_of

__all__ = ["guard_unsigned_compares", "GuardUnsignedCompares"]


def _is_unsigned(node: Any) -> bool:
    kind = tvm.DataType(dtype_of(node))
    return kind.type_code == tvm.DataTypeCode.UINT and kind.bits >= 8


def _is_constant(node: Any) -> bool:
    if isinstance(node, tirx.Broadcast):
        node = node.value
    return isinstance(node, tirx.IntImm)


def _terms(node: Any) -> list:
    """``node``, and its two operands when it is a sum or a difference; constants left out."""
    terms = [node, node.a, node.b] if isinstance(node, (tirx.Add, tirx.Sub)) else [node]
    return [t for t in terms if not _is_constant(t)]


def _on_compare(node: Any) -> Any:
    a, b = node.a, node.b
    if not _is_unsigned(a):
        return node
    if not any(tvm_ffi.structural_equal(x, y) for x in _terms(a) for y in _terms(b)):
        return node
    if not _is_constant(b) and can_hide(b):
        return type(node)(a, barrier(b))
    if not _is_constant(a) and can_hide(a):
        return type(node)(barrier(a), b)
    return node


_ENTRIES = [((tirx.LT, tirx.LE, tirx.GT, tirx.GE), _on_compare)]


def guard_unsigned_compares(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the unsigned comparisons of the module docstring guarded."""
    body = checked_map(func.body, _ENTRIES)
    return func if body.same_as(func.body) else func.with_body(body)


def GuardUnsignedCompares() -> tvm.transform.Pass:  # noqa: N802 - a pass, named like TVM's
    """:func:`guard_unsigned_compares` as a pass over every PrimFunc of a module."""
    return tirx.transform.prim_func_pass(
        lambda func, mod, ctx: guard_unsigned_compares(func), opt_level=0, name="tl.GuardUnsignedCompares"
    )
