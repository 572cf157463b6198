"""Extending TVMScript's ``tirx`` parser one node type at a time.

Several language forms (tuple and chained assignment, parameters typed in the body, the names of
a ``for`` statement) are taught to TVMScript by wrapping its visitor of one node type: the new
visitor handles its form and hands every other node to the visitor it replaced. :func:`wrap_visitor`
does the registration for all of them: it looks up the current visitor, registers the new one
around it, and does this once per extension however often the extension is installed.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

__all__ = ["wrap_visitor"]

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
