"""``while True:`` without a way out: refused at its line, as TileLang refuses it.

A ``while`` whose condition is true when the kernel is parsed (``True``, ``1``, a Python
comparison of configuration values) never ends unless its body leaves it, and a kernel that never
returns hangs the calling process (or the GPU). TileLang stops such a loop with "Infinite while
loop detected"; TVMScript built it (``while (1) {`` in the generated C). :func:`install` refuses it
at the ``while`` line unless the body has a ``break`` (or ``T.loop_break()``) of its own, not one
of an inner loop, which this package accepts as TileLang's ``while`` with a break does on the
run-time conditions it allows.
"""

from __future__ import annotations

from typing import Any

from .python_conditions import constant_truth
from .tirx_visitors import given_values, wrap_visitor

__all__ = ["install"]


def _leaves(body: list, doc: Any) -> bool:
    """Whether ``body`` (statements of a ``while``) has a ``break`` of that loop: a ``break`` or
    ``T.loop_break()`` that is not inside an inner ``for``/``while`` (whose own break it is)."""
    for stmt in body:
        if isinstance(stmt, doc.Break):
            return True
        if isinstance(stmt, doc.Expr) and isinstance(stmt.value, doc.Call):
            func = stmt.value.func
            if getattr(func, "attr", getattr(func, "id", None)) == "loop_break":
                return True
        if isinstance(stmt, (doc.For, doc.While, doc.FunctionDef)):
            continue
        for field in ("body", "orelse", "handlers", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and _leaves(inner, doc):
                return True
    return False


def _visit_while(original: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    from .macro_arguments import WHILE_CONDITION, expression_context
    from .python_loops import _refuse_else

    _refuse_else(self, node, "while")
    with expression_context(self, *WHILE_CONDITION):  # a macro with statements there ran them once, before the loop
        value = self.eval_expr(node.test)
    if constant_truth(value) and not _leaves(node.body, doc):
        self.report_error(
            node.test,
            "this while loop never ends: its condition is always true and its body has no break, so the "
            "kernel would hang (TileLang refuses it too). Loop over a run-time condition (while i < n:), "
            "add a break, or use a for loop",
        )
    with given_values(self, (node.test, value)):  # TVMScript's visitor evaluates the condition itself
        return original(self, node)


def install() -> None:
    """Refuse a ``while`` that can never end in kernels parsed by TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("While", _visit_while)
