"""Tuple assignment in kernels: ``A[0], A[1] = A[1], A[0]`` and ``a, b = b, a`` (``T.alloc_var``).

Python evaluates every value on the right before it stores any target, so these swap. TVMScript
refuses subscripts in a tuple target and, for names already defined (``T.alloc_var`` variables),
reports them as redefined. :func:`install` teaches TVMScript's ``tirx`` parser the form
``t1, ..., tn = v1, ..., vn`` (same length; each target a name or a subscript, at least one of
them a subscript or an existing name): each value is first bound to a fresh variable (evaluated
once, in order), then each target is assigned from its variable as a single assignment would
be. Other tuple assignments (new names, unpacking a call) keep TVMScript's own handling.
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import wrap_visitor

__all__ = ["install"]


def _plain_pairs(self: Any, node: Any, doc: Any) -> Any:
    """``(targets, values)`` when ``node`` is a tuple assignment this module handles, else None."""
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0], node.value
    if not (isinstance(target, (doc.Tuple, doc.List)) and isinstance(value, (doc.Tuple, doc.List))):
        return None
    targets, values = list(target.elts), list(value.elts)
    if len(targets) != len(values) or len(targets) < 2:
        return None
    if not all(isinstance(t, (doc.Name, doc.Subscript)) for t in targets):
        return None
    defined = self.var_table.get()
    if not any(isinstance(t, doc.Subscript) or t.id in defined for t in targets):
        return None
    return targets, values


def _visit_assign(previous: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    pairs = _plain_pairs(self, node, doc)
    if pairs is None:
        return previous(self, node)
    targets, values = pairs
    where = dict(lineno=node.lineno, col_offset=node.col_offset, end_lineno=node.end_lineno,
                 end_col_offset=node.end_col_offset)
    serial = getattr(self, "_tl_tuple_assigns", 0)  # per parse: the names stay deterministic
    self._tl_tuple_assigns = serial + 1
    names = [f"_tl_tuple_value_{serial}_{k}" for k in range(len(values))]
    for name, value in zip(names, values):
        previous(self, doc.Assign(targets=[doc.Name(id=name, ctx=doc.Store(), **where)], value=value, **where))
    for name, target in zip(names, targets):
        previous(self, doc.Assign(targets=[target], value=doc.Name(id=name, ctx=doc.Load(), **where), **where))
    return None


def install() -> None:
    """Register the tuple-assignment form with TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("Assign", _visit_assign)
