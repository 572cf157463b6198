"""``if`` on a plain Python value in a kernel: Python's truthiness, as in TileLang.

TVMScript takes an ``if`` whose condition is a TIR expression (a run-time branch) or a Python
``bool`` (a branch chosen when the kernel is parsed), and stops at any other value with "If
condition must be a boolean expression, but got None". Kernels written for TileLang branch on
configuration values of any kind: ``is_hopper = check_hopper()`` is ``None`` on a machine
without CUDA, ``if block_k:`` tests a number, ``if extra_args:`` a list (upstream's
``examples/convolution`` does the first). :func:`install` makes such a condition choose its
branch by Python's ``bool(value)``, once, when the kernel is parsed, and hands every other
condition to TVMScript's own visitor with the value already evaluated (a condition that calls a
``T.macro`` is not evaluated twice). A scalar number expression (``if A[i]:``, ``if i % 2:``) is
tested against zero at run time, as Python and C do, and ``x or y`` / ``x and y`` of numbers give
Python's value (a select) rather than TVM's error.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

from .tirx_visitors import given_values, wrap_visitor

__all__ = ["install", "is_python_condition"]

#: Values branched on by their truthiness: ``None``, numbers (numpy's too), strings, containers.
_PLAIN = (type(None), numbers.Number, str, bytes, list, tuple, dict, set, frozenset)


def is_python_condition(value: Any) -> bool:
    """Whether ``value`` is a plain Python value (not a TIR expression, not a ``bool``) whose
    truthiness chooses an ``if`` branch at parse time."""
    import numpy as np
    import tvm

    if isinstance(value, bool) or tvm.ir.is_prim_expr(value) or isinstance(value, tvm.tirx.expr.ExprOp):
        return False
    return isinstance(value, _PLAIN) or isinstance(value, (np.generic,)) and np.ndim(value) == 0


def constant_truth(value: Any) -> Optional[bool]:
    """The truth of a condition known when the kernel is defined (a Python value, a TIR integer or
    float constant, an expression of no variable), else None (a condition checked when the kernel
    runs). ``assert`` (kernel_asserts.py) and ``while`` (while_loops.py) decide by it."""
    import tvm

    if isinstance(value, bool) or is_python_condition(value):
        return bool(value)
    value = getattr(value, "scalar", value)  # T.alloc_var's wrapper
    if isinstance(value, tvm.tirx.Expr) and not isinstance(value, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
        try:  # T.int32(3) > 2 is not folded when it is built; an expression of no variable is a constant
            value = tvm.arith.Analyzer().simplify(value)
        except Exception:  # noqa: BLE001 - not a scalar expression: refused where it is emitted
            return None
    if isinstance(value, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
        return bool(value.value)
    return None


def _truth(value: Any) -> Any:
    """A scalar integer or float expression as a condition: ``value != 0``, as Python and C test
    it (NaN is true). TVMScript took ``if A[i]:`` without ``else`` and stopped with its own
    "Check failed: (a_ty.MatchesCode(DLDataTypeCode::kDLBool))" at the ``def`` line with one."""
    import tvm
    from tvm import tirx

    if not tvm.ir.is_prim_expr(value) and not isinstance(value, tvm.tirx.expr.ExprOp):
        return value
    dtype = str(getattr(value, "dtype", ""))
    if dtype.startswith(("int", "uint", "float", "bfloat")) and "x" not in dtype:
        return value != tirx.const(0, dtype)
    return value


def _visit_if(original: Any, self: Any, node: Any) -> None:
    value = self.eval_expr(node.test)
    if is_python_condition(value):
        value = bool(value)
    else:
        value = _truth(value)
    with given_values(self, (node.test, value)):  # TVMScript's visitor evaluates the condition itself
        return original(self, node)


def _negation(original: Any) -> Any:
    def negate(value: Any) -> Any:
        """``not x`` of a number expression: ``x == 0`` (TVMScript's Not takes booleans only)."""
        return original(_truth(value))

    return negate


def _is_number_expression(value: Any) -> bool:
    """Whether ``value`` is a scalar integer or float TIR expression (not a boolean)."""
    return _truth(value) is not value


def _selection(is_or: bool, original: Any) -> Any:
    def select(a: Any, b: Any) -> Any:
        """``a or b`` / ``a and b`` where an operand is a number: Python's value, not a boolean."""
        from tvm import tirx

        if not (_is_number_expression(a) or _is_number_expression(b)):
            return original(a, b)
        if is_python_condition(a):  # known when the kernel is parsed: Python chooses
            return (a if a else b) if is_or else (b if a else a)
        if isinstance(b, bool) or not (_is_number_expression(b) or is_python_condition(b)):
            return original(_truth(a), _truth(b))  # next to a boolean: a condition of both
        from .kept_effects import has_side_effect

        if has_side_effect(a):  # T.atomic_add(..., return_prev=True) or 1: the atomic runs once
            value = tirx.Var("selected", a.ty.dtype)
            return tirx.Let(value, a, select(value, b))
        condition = _truth(a)
        return tirx.if_then_else(condition, a, b) if is_or else tirx.if_then_else(condition, b, a)

    select.__doc__ = (
        f"Python's ``{'or' if is_or else 'and'}`` in a kernel: of two numbers the value it returns "
        "(a select), else TVMScript's boolean operation."
    )
    return select


def _if_expression(self: Any, node: Any) -> Any:
    """``a if cond else b`` with Python's truthiness: a plain Python value (``None``, a number, a
    list) chooses when the kernel is parsed, a number expression is tested against zero when the
    kernel runs, as ``if`` statements do (TVMScript took a bool alone: "Expected Python bool or TIR
    bool, but got <class 'NoneType'>"). Two tuples of a run-time condition are chosen item by item
    (``a, b = (x, 1.0) if c else (2.0, y)``; TVM: "Expected ir.Expr but got ffi.Array")."""
    from tvm import tirx

    test = self._eval_expr(self._visit(node.test))
    test = bool(test) if is_python_condition(test) else _truth(test)
    if isinstance(test, bool):
        return self._eval_expr(self._visit(node.body if test else node.orelse))
    from .macro_arguments import CONDITIONAL_BRANCH, expression_context

    with expression_context(self.parser, *CONDITIONAL_BRANCH):  # both are evaluated: no macro statements there
        body = self._eval_expr(self._visit(node.body))
        orelse = self._eval_expr(self._visit(node.orelse))
    return _choose(test, body, orelse)


def _choose(test: Any, body: Any, orelse: Any) -> Any:
    """``T.if_then_else(test, body, orelse)``, item by item for two tuples (``a, b = (x, 1.0) if c
    else (2.0, y)``; nested ones too); TVM: "Expected `ir.Expr` but got `ffi.Array`"."""
    from tvm import tirx

    tuples = isinstance(body, (tuple, list)), isinstance(orelse, (tuple, list))
    if tuples == (True, True):
        if len(body) != len(orelse):
            raise ValueError(f"x if cond else y of a condition known only when the kernel runs chooses item by item, "
                             f"but its two tuples have {len(body)} and {len(orelse)} items")
        return tuple(_choose(test, a, b) for a, b in zip(body, orelse))
    if any(tuples):
        raise ValueError("x if cond else y of a condition known only when the kernel runs: one branch is a tuple and "
                         "the other is not; give both branches the same shape")
    for branch in (body, orelse):
        if branch is None or isinstance(branch, str):
            raise ValueError(f"x if cond else y of a condition known only when the kernel runs chooses a value when "
                             f"the kernel runs, but a branch is {branch!r}; both branches must be numbers or "
                             f"expressions")
    return tirx.if_then_else(test, body, orelse)


_NOT_INSTALLED = False


def install() -> None:
    """Register Python truthiness for ``if`` conditions, ``not``, ``and`` and ``or`` with
    TVMScript's ``tirx`` parser (idempotent): ``not (i % 3)`` stopped with TVM's bare "Check
    failed: (a_ty.MatchesCode(DLDataTypeCode::kDLBool))", and ``A[i] or 1.0`` with "'float'
    object has no attribute 'expr_ty'". ``x or y`` of numbers is Python's value, ``y`` where
    ``x`` is zero, else ``x`` (``x and y``: ``x`` where ``x`` is zero, else ``y``), evaluated as a
    select (``T.if_then_else``); next to a boolean a number is its truth (``x != 0``)."""
    global _NOT_INSTALLED
    wrap_visitor("If", _visit_if)
    if _NOT_INSTALLED:
        return
    from tvm import tirx
    from tvm.script.parser.core import dispatch, doc

    original = dispatch.get_op(tirx.Expr, doc.Not, 0)
    if original is not None:
        dispatch.register_op(tirx.Expr, doc.Not, 0)(_negation(original))
    if dispatch.get_op(tirx.Expr, doc.UAdd, 0) is None:  # +x is x (Python: "bad operand type for unary +")
        dispatch.register_op(tirx.Expr, doc.UAdd, 0)(lambda x: x)
    from tvm.script.parser.core.evaluator import ExprEvaluator

    ExprEvaluator._eval_if_exp = _if_expression
    for node, is_or in ((doc.Or, True), (doc.And, False)):
        for operand_type in (tirx.Expr, tirx.IterVar):
            for index in (0, 1):
                original = dispatch.get_op(operand_type, node, index)
                if original is not None:
                    dispatch.register_op(operand_type, node, index)(_selection(is_or, original))
    _NOT_INSTALLED = True
