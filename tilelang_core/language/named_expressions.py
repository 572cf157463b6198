"""``(t := expr)`` in a kernel: the name is bound to the expression's value, as in Python and TileLang.

TVMScript's expression evaluator has no case for Python's assignment expression and stopped at
its target with "Undefined variable: t". :func:`install` teaches it one: the value is evaluated,
bound to the name for the rest of the expression and for the statements after it (in the scope
the expression is in: the ``if``'s test binds for both branches and what follows), and is the
expression's value. As in TileLang the name stands for the expression itself, so each use reads
it again: ``if (t := A[i] * 2) > 1: B[i] = t`` stores ``A[i] * 2``. An expression with a side
effect (an atomic, ``T.call_extern``) would then run again at each use; such a value is refused,
saying to assign it in a statement of its own (``t = T.atomic_add(...)``), which runs it once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_ORIGINAL = "_tilelang_original_visit_node"


def _bind(self: Any, node: Any) -> Any:
    """Evaluate ``node`` (a ``doc.NamedExpr``), bind its target and return the value's table name."""
    import tvm

    from .kept_effects import has_side_effect

    value = self._eval_expr(self._visit(node.value))
    name = node.target.id
    if tvm.ir.is_prim_expr(value) and has_side_effect(value):
        self.parser.report_error(
            node,
            f"({name} := ...) of an expression with a side effect (an atomic, T.call_extern): in a "
            f"kernel {name} stands for the expression, so each use of {name} would run it again. "
            f"Assign it in a statement of its own ({name} = ...), which runs it once.",
        )
    self.value_table[name] = value
    self.parser.var_table.add(name, value, allow_shadowing=True)
    return self._add_intermediate_result(value)


def install() -> None:
    """Teach TVMScript's expression evaluator ``(name := value)`` (idempotent)."""
    from tvm.script.parser.core import doc
    from tvm.script.parser.core.evaluator import ExprEvaluator

    if getattr(ExprEvaluator, _ORIGINAL, None) is not None:
        return
    original = ExprEvaluator._visit_node

    def _visit_node(self: Any, node: Any) -> Any:
        if isinstance(node, doc.NamedExpr) and self.parser is not None:
            return _bind(self, node)
        return original(self, node)

    _visit_node.__doc__ = original.__doc__
    setattr(ExprEvaluator, _ORIGINAL, original)
    ExprEvaluator._visit_node = _visit_node
