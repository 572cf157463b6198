"""``for`` over a Python sequence in a kernel body: unrolled when the kernel is parsed, as in TileLang.

``for w in (1.0, 2.0, 3.0):`` or ``for v in vals:`` over a macro's ``*vals`` stopped TVMScript
with "Expect the for loop to be one of the following: range, T.serial, ...". TileLang kernels use
such loops to repeat statements over configuration values. :func:`install` wraps TVMScript's
``tirx`` ``for`` visitor: when the iterator is a Python collection or iterator (a list, a tuple,
``enumerate(...)``, ``zip(...)``), the body is parsed once per item, the target names bound to
the item's values as Python values (``for k, w in enumerate(ws)`` too), each pass in a scope of
its own. Every other iterator (``range(...)``,
``T.serial``, ``T.Parallel``, ...) goes to TVMScript's visitor, evaluated once. ``break``,
``continue`` and ``else`` of such a loop have no run-time loop to act on and are refused at the
line.
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import given_values, wrap_visitor

__all__ = ["install"]


def _python_value(_parser: Any, _node: Any, _name: str, value: Any) -> Any:
    """Bind a name of an unrolled loop to its item as it is (a Python value, an expression)."""
    return value


def _python_sequence(value: Any) -> bool:
    """Whether ``value`` is a Python collection or iterator (a list, a tuple, ``enumerate(...)``,
    ``zip(...)``, a generator) rather than a loop of TVMScript (a ``ForFrame``) or an IR object."""
    import collections.abc

    import tvm

    if isinstance(value, (tvm.runtime.Object, str, bytes)):
        return False
    return isinstance(value, (list, tuple, dict, set, frozenset, range)) or isinstance(value, collections.abc.Iterator)


def _jumps(body: list, doc: Any) -> Any:
    """The first ``break``/``continue`` of ``body`` that would leave this loop (not one of an inner loop)."""
    todo = list(body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (doc.Break, doc.Continue)):
            return node
        if isinstance(node, (doc.For, doc.While, doc.FunctionDef)):
            continue
        for field in ("body", "orelse"):
            todo.extend(getattr(node, field, None) or [])
    return None


def _refuse_else(parser: Any, node: Any, loop: str) -> None:
    """A run-time loop's ``else``: TVMScript dropped it without a word (the kernel skipped code
    Python would run after a loop that did not break); refused at its line, as TileLang does."""
    if node.orelse:
        parser.report_error(node.orelse[0], f"else of a {loop} loop is not supported in a kernel (TVMScript would "
                                            f"drop it): set a flag before break and test it after the loop, or move "
                                            f"the code after the loop")


def _visit_for(previous: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    it = node.iter
    if isinstance(it, doc.Call) and isinstance(it.func, doc.Name) and it.func.id == "range":
        _refuse_else(self, node, "for")
        return previous(self, node)  # TVMScript reads range()'s arguments itself
    items = self.eval_expr(it)
    if not _python_sequence(items):
        _refuse_else(self, node, "for")
        with given_values(self, (it, items)):  # evaluated once
            return previous(self, node)
    jump = _jumps(node.body, doc)
    if jump is not None:
        self.report_error(jump, f"{'break' if isinstance(jump, doc.Break) else 'continue'} in a for loop over a "
                                "Python list or tuple is not supported: that loop is unrolled when the kernel is "
                                "parsed; use range(...) or T.serial(...) for a loop that runs")
    if node.orelse:
        self.report_error(node.orelse[0], "else of a for loop over a Python list or tuple is not supported: that "
                                          "loop is unrolled when the kernel is parsed")
    for item in list(items):
        with self.var_table.with_frame():
            self.eval_assign(target=node.target, source=item, bind_value=_python_value)
            self.visit_body(node.body)
    return None


def install() -> None:
    """Wrap TVMScript's ``tirx`` ``for`` visitor with the unrolling of Python sequences (idempotent)."""
    wrap_visitor("For", _visit_for)
