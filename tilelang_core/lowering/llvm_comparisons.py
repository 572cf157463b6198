"""Comparisons that TVM 0.27's LLVM code generator emits wrong, rewritten right before it.

- ``!=`` of floats is emitted as LLVM's *ordered* not-equal (``fcmp one``), which is false when
  an operand is NaN: ``A[i] != B[i]`` was 0 for ``A[i] = NaN`` on target ``llvm`` (IEEE, C, CUDA
  and torch: 1), and ``x != x``, the usual NaN test, was always 0. It becomes ``!(a == b)``
  (``fcmp oeq``, false for NaN, negated).
- ``==`` and ``!=`` of two booleans are emitted as a floating-point comparison of ``i1`` values,
  which LLVM's verifier refuses: ``T.if_then_else((A[i] > 0) == (B[i] > 0), ...)`` failed to lower
  ("Invalid operand types for FCmp instruction"). ``<``, ``<=``, ``>`` and ``>=`` of booleans
  stopped the code generator with the internal check below. The operands of all six are
  compared as ``int8`` (0 or 1: false < true, as in C and torch).
- ``T.min`` and ``T.max`` of two booleans (and so ``T.clamp``) stopped it the same way; they
  become ``and`` and ``or``.

- ``+``, ``*`` and ``-`` of two booleans stop TVM's LLVM code generator with an internal check
  ("t.MatchesCode(DLDataTypeCode::kDLFloat)"): ``T.Cast("bool", a) + T.Cast("bool", b)`` did not
  lower. They become what ``c`` and ``cuda`` compute (C's ``int`` arithmetic stored back into a
  ``bool``: nonzero is true), which for ``+`` and ``*`` is also torch's: ``a + b`` is ``a || b``,
  ``a * b`` is ``a && b``, ``a - b`` is ``a != b``.

:func:`llvm_comparisons` runs on the LLVM host module after every simplification (which would fold
the rewrites back); ``c`` and ``cuda`` print these comparisons as C's ``!=`` and ``==``.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import dtype_of, is_float, with_lanes

__all__ = ["llvm_comparisons"]

def _on_compare(node: Any) -> Any:
    dtype = dtype_of(node.a)
    element = tvm.DataType(dtype).with_lanes(1)
    if element == tvm.DataType("bool"):
        wide = with_lanes("int8", dtype)
        return type(node)(tirx.Cast(wide, node.a), tirx.Cast(wide, node.b))
    if isinstance(node, tirx.NE) and is_float(dtype):
        return tirx.Not(tirx.EQ(node.a, node.b))
    return node


def _on_bool_arith(node: Any) -> Any:
    if tvm.DataType(dtype_of(node)).with_lanes(1) != tvm.DataType("bool"):
        return node
    if isinstance(node, tirx.Add):
        return tirx.Or(node.a, node.b)
    if isinstance(node, tirx.Mul):
        return tirx.And(node.a, node.b)
    return tirx.NE(node.a, node.b)  # Sub: 1 - 1 = 0 - 0 = 0, 1 - 0 = 0 - 1 = nonzero


def _on_bool_min_max(node: Any) -> Any:
    if tvm.DataType(dtype_of(node)).with_lanes(1) != tvm.DataType("bool"):
        return node
    return tirx.And(node.a, node.b) if isinstance(node, tirx.Min) else tirx.Or(node.a, node.b)


_COMPARISONS = (tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)


def _rewrite(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, [((tirx.Add, tirx.Mul, tirx.Sub), _on_bool_arith),
                                   ((tirx.Min, tirx.Max), _on_bool_min_max)])
    body = checked_map(body, [(_COMPARISONS, _on_compare)])
    return func if body.same_as(func.body) else func.with_body(body)


def llvm_comparisons(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the comparisons of the module docstring in a form LLVM code generation gets right."""
    return tirx.transform.prim_func_pass(_rewrite, opt_level=0, name="tl.LLVMComparisons")(mod)
