"""``and``/``or`` whose right operand may trap, kept short-circuit on target ``llvm``.

TVM 0.27's LLVM code generator computes both operands of ``and`` and ``or`` (an ``and i1`` of two
values), where C and CUDA evaluate the right one only when the left one does not decide (``&&``,
``||``). A guard written as ``if D[i] != 0 and X[i] // D[i] > 1:`` (or ``... or ...``) therefore
divided by zero on ``llvm`` for ``D[i] = 0``: the process stopped with ``SIGFPE`` (target ``c``
and CUDA: right). An ``and``/``or`` whose right operand holds an integer division or remainder by
a divisor that is not a nonzero constant becomes ``T.if_then_else``, which the LLVM code generator
evaluates as a branch: ``a and b`` -> ``if_then_else(a, b, False)``, ``a or b`` ->
``if_then_else(a, True, b)``. Other right operands keep the plain (branch-free) form.

Atomics and external calls in such places are handled before any lowering, for every target
(lowering/atomic_values.py, ``branch_effects``). A select (``T.Select``) evaluates both arms by
TVM's definition on every target and is left alone; ``T.if_then_else`` is the guarded form.

:func:`llvm_short_circuit` runs on the LLVM host module after every simplification, next to
lowering/llvm_comparisons.py.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..language.tileops._common import collect
from .atomics import checked_map

__all__ = ["llvm_short_circuit", "may_trap"]

_DIVISIONS = (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)


def _nonzero_constant(node: Any) -> bool:
    return isinstance(node, tirx.IntImm) and node.value != 0


def may_trap(node: Any) -> bool:
    """Whether ``node`` holds an integer division or remainder whose divisor is not a nonzero
    constant (a hardware trap on x86 when it is 0)."""
    for div in collect(node, _DIVISIONS):
        dtype = tvm.DataType(str(div.ty.dtype))
        if dtype.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) and not _nonzero_constant(div.b):
            return True
    return False


def _on_logical(node: Any) -> Any:
    if tvm.DataType(str(node.ty.dtype)).lanes != 1 or not may_trap(node.b):
        return node
    if isinstance(node, tirx.And):
        return tirx.if_then_else(node.a, node.b, tirx.const(False, "bool"))
    return tirx.if_then_else(node.a, tirx.const(True, "bool"), node.b)


def _rewrite(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    body = checked_map(func.body, [((tirx.And, tirx.Or), _on_logical)])
    return func if body.same_as(func.body) else func.with_body(body)


def llvm_short_circuit(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with each ``and``/``or`` whose right operand may trap written as a branch."""
    return tirx.transform.prim_func_pass(_rewrite, opt_level=0, name="tl.LLVMShortCircuit")(mod)
