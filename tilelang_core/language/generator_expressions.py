"""Generator expressions in kernels (``sum(A[j] for j in range(4))``), evaluated like list comprehensions.

TVMScript's expression evaluator evaluates list, set and dict comprehensions as Python does, on
the kernel's names, but visited a generator expression's parts one by one and stopped at its loop
variable ("Undefined variable: j"). :func:`install` gives generator expressions the comprehensions'
handling: Python builds the generator, and ``sum``, ``max``, ``tuple(...)`` of it see the same items
as of the list ``[A[j] for j in range(4)]``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_MARK = "_tilelang_generator_expressions"


def install() -> None:
    """Wrap TVMScript's ``ExprEvaluator._visit_node`` (idempotent)."""
    from tvm.script.parser.core import doc
    from tvm.script.parser.core.evaluator import ExprEvaluator

    original = ExprEvaluator._visit_node
    if getattr(original, _MARK, False):
        return

    def visit_node(self: Any, node: Any) -> Any:
        if isinstance(node, doc.GeneratorExp):
            return self._add_intermediate_result(self._eval_expr(node))
        return original(self, node)

    visit_node.__doc__ = original.__doc__
    setattr(visit_node, _MARK, True)
    ExprEvaluator._visit_node = visit_node
