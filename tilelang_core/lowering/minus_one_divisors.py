"""Integer ``floordiv(a, -1)`` and ``floormod(a, -1)`` spelled out before TVM's ``LowerIntrin``.

TVM 0.27's ``LowerIntrin`` lowers a floor division or remainder whose divisor it cannot prove
non-negative into ``let rmod = truncmod(a, b) in ...``; for a divisor of ``-1`` that ``let``
survives into the dividend of an enclosing floor division or remainder with a run-time divisor,
which ``LowerIntrin`` copies into both its ``truncdiv`` and ``truncmod``, so one ``let`` variable
is bound twice and the LLVM path stopped with TVM's internal "Binding of variable rmod ...
conflicts with previous binding" (``T.floordiv(x, -1) // y``, ``(x // -1) % y`` of int32 or
int64; found by a differential fuzz pass). Here ``floordiv(a, -1)`` is ``a * -1`` (the same value;
both overflow only for the type's minimum) and ``floormod(a, -1)`` is ``a * 0`` (0; ``a`` is still
evaluated), so no ``let`` is made. Runs right before ``LowerIntrin`` (``passes._lower_intrin``).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map

__all__ = ["MinusOneDivisors"]


def _minus_one(node: Any) -> bool:
    b = node.b
    return isinstance(b, tirx.IntImm) and int(b.value) == -1 and str(b.ty.dtype).startswith("int")


def _floordiv(node: Any) -> Any:
    return tirx.Mul(node.a, tirx.IntImm(str(node.b.ty.dtype), -1)) if _minus_one(node) else node


def _floormod(node: Any) -> Any:
    return tirx.Mul(node.a, tirx.IntImm(str(node.b.ty.dtype), 0)) if _minus_one(node) else node


def _rewrite(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, [(tirx.FloorDiv, _floordiv), (tirx.FloorMod, _floormod)])
    return func if body.same_as(func.body) else func.with_body(body)


def MinusOneDivisors() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass rewriting integer ``floordiv(a, -1)`` / ``floormod(a, -1)`` (module docstring)."""
    return tirx.transform.prim_func_pass(_rewrite, opt_level=0, name="tl.MinusOneDivisors")
