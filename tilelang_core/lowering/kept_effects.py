"""Operations with an operand that has a side effect are hidden from TVM's simplifier.

TVM 0.27's simplifier folds ``x * 0``, ``0 / x``, ``x % 1`` to 0 and ``x - x`` to 0 (and more:
``min(x, x)`` to ``x``, ``x == x`` to true) by the operands' values alone, also where ``x`` calls
a function with a side effect: ``T.call_extern("int32", "bump", p) * 0`` and
``bump(p) - bump(p)`` did not call ``bump`` at all, without an error. (Atomics as operands are
evaluated in front of their statement first, lowering/atomic_values.py, and constant folding when
an expression is built is language/kept_effects.py.)

:func:`guard_side_effects` hides, in each arithmetic or comparison operation with an operand that
has a side effect (language/kept_effects.py's :func:`has_side_effect`), the other operand behind
:func:`.barriers.barrier` (the right one when both have one): no rule of the simplifier then sees
a constant, or two equal operands, next to the call. It runs right before the first
simplification of every pass list; :func:`.barriers.StripBarriers` removes the round trips right
before code generation. Operations without such an operand, and boolean ``and``/``or`` (a bool
cannot be hidden), are untouched.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..language.kept_effects import has_side_effect
from .atomics import checked_map
from .barriers import barrier, can_hide

__all__ = ["guard_side_effects", "GuardSideEffects"]

#: The operations whose rules may drop an operand.
OPERATIONS = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod, tirx.Min, tirx.Max,
              tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)


def _on_operation(node: Any) -> Any:
    a_effect, b_effect = has_side_effect(node.a), has_side_effect(node.b)
    if not (a_effect or b_effect):
        return node
    if a_effect:  # hide b (also when b has one: two equal calls are not matched then)
        return type(node)(node.a, barrier(node.b)) if can_hide(node.b) else node
    return type(node)(barrier(node.a), node.b) if can_hide(node.a) else node


def guard_side_effects(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with one operand of each operation next to a side effect hidden (module docstring)."""
    if not has_side_effect(func.body):  # one walk: most kernels call nothing with a side effect
        return func
    body = checked_map(func.body, [(OPERATIONS, _on_operation)])
    return func if body.same_as(func.body) else func.with_body(body)


def GuardSideEffects() -> tvm.transform.Pass:  # noqa: N802 - a pass, named like TVM's
    """:func:`guard_side_effects` as a pass over every PrimFunc of a module."""
    return tirx.transform.prim_func_pass(
        lambda func, mod, ctx: guard_side_effects(func), opt_level=0, name="tl.GuardSideEffects"
    )
