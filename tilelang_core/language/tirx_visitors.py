"""Extending TVMScript's ``tirx`` parser one node type at a time.

Several language forms (tuple and chained assignment, parameters typed in the body, the names of
a ``for`` statement) are taught to TVMScript by wrapping its visitor of one node type: the new
visitor handles its form and hands every other node to the visitor it replaced. :func:`wrap_visitor`
does the registration for all of them: it looks up the current visitor, registers the new one
around it, and does this once per extension however often the extension is installed.
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any, Callable, Iterator

__all__ = ["assign_hook", "given_values", "wrap_visitor"]

#: The extensions already registered (``module.qualname`` of their visit functions).
_WRAPPED: set = set()


def wrap_visitor(type_name: str, visit: Callable[..., Any]) -> None:
    """Register ``visit(previous, parser, node)`` as the ``tirx`` parser's visitor of
    ``type_name`` nodes (``"Assign"``, ``"For"``, ...), where ``previous`` is the visitor it
    replaces. Idempotent per ``visit``; nothing happens when TVMScript has no such visitor."""
    key = f"{visit.__module__}.{visit.__qualname__}"
    if key in _WRAPPED:
        return
    from tvm.script.parser.core import dispatch

    previous = dispatch.get(token="tirx", type_name=type_name)
    if previous is None:
        return
    dispatch.register(token="tirx", type_name=type_name)(partial(visit, previous))
    _WRAPPED.add(key)


@contextlib.contextmanager
def given_values(parser: Any, *pairs: tuple[Any, Any]) -> Iterator[None]:
    """Within the block, ``parser.eval_expr(node)`` returns the value given for each ``(node,
    value)`` of ``pairs`` (nodes a wrapping visitor has evaluated already, handed to the visitor it
    wraps so that nothing is evaluated twice: a macro call in a condition stores once); any other
    node is evaluated as before. Nested blocks stack."""
    own = parser.__dict__.get("eval_expr")
    evaluate = parser.eval_expr

    def eval_expr(expr: Any) -> Any:
        for node, value in pairs:
            if expr is node:
                return value
        return evaluate(expr)

    parser.eval_expr = eval_expr
    try:
        yield
    finally:
        if own is None:
            del parser.eval_expr
        else:
            parser.eval_expr = own


@contextlib.contextmanager
def assign_hook(parser: Any, target: Any, hook: Callable[[dict], None]) -> Iterator[None]:
    """Within the block, each ``parser.eval_assign(...)`` of the statement target ``target`` (a
    doc node) first calls ``hook(arguments)`` with its arguments by name (``target``, ``source``,
    ``bind_value``, ``allow_shadowing``; the hook may check or change them), then binds as before;
    assignments of other targets (nested statements) are left alone. Nested blocks stack."""
    outer = parser.__dict__.get("eval_assign")
    method = type(parser).eval_assign

    def eval_assign(*args: Any, **kwargs: Any) -> Any:
        bound = dict(zip(("target", "source", "bind_value", "allow_shadowing"), args), **kwargs)
        if bound.get("target") is target:
            hook(bound)
        if outer is not None:
            return outer(**bound)
        return method(parser, **bound)

    parser.eval_assign = eval_assign
    try:
        yield
    finally:
        if outer is None:
            del parser.eval_assign
        else:
            parser.eval_assign = outer
