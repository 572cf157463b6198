"""Tuple assignment in kernels: ``A[0], A[1] = A[1], A[0]`` and ``a, b = b, a`` (``T.alloc_var``).

Python evaluates every value on the right before it stores any target, so these swap. TVMScript
refuses subscripts in a tuple target and, for names already defined (``T.alloc_var`` variables),
reports them as redefined. :func:`install` teaches TVMScript's ``tirx`` parser the form
``t1, ..., tn = v1, ..., vn`` (same length; each target a name or a subscript, at least one of
them a subscript or an existing name): each value is first bound to a fresh variable (evaluated
once, in order), then each target is assigned from its variable as a single assignment would
be. So is ``a, b = pair(x)`` (a call or any value giving a tuple) when a target exists: TVMScript
refused the existing names in the same block ("Variable a already defined in current scope") and
made new ones local to an ``if`` or loop body, whose values were gone after it. The value is
evaluated once and must be a tuple of as many items as targets (else Python's "cannot unpack").
Other tuple assignments (all names new) keep TVMScript's own handling.
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import wrap_visitor

__all__ = ["install"]


def _plain_pairs(self: Any, node: Any, doc: Any) -> Any:
    """``(targets, values)`` when ``node`` is a tuple assignment this module handles, else None;
    ``values`` is None when the right side is not a literal tuple (``a, b = pair(x)``)."""
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0], node.value
    if not isinstance(target, (doc.Tuple, doc.List)):
        return None
    targets = list(target.elts)
    if len(targets) < 2 or not all(isinstance(t, (doc.Name, doc.Subscript)) for t in targets):
        return None
    defined = self.var_table.get()
    if not isinstance(value, (doc.Tuple, doc.List)):
        # a, b = pair(x): only where a target is a subscript or a scalar variable of the kernel
        # (m, N = A.shape beside a module global N keeps TVMScript's binding of names)
        if not any(isinstance(t, doc.Subscript) or _is_variable(defined.get(t.id)) for t in targets):
            return None
        return targets, None
    if not any(isinstance(t, doc.Subscript) or t.id in defined for t in targets):
        return None
    values = list(value.elts)
    if len(targets) != len(values):
        return None
    return targets, values


def _is_variable(value: Any) -> bool:
    """Whether a name's value is a scalar variable of the kernel (``x = A[i]``, ``T.alloc_var``),
    which an assignment stores into."""
    from tvm.ir import TensorLoad

    return isinstance(value, TensorLoad)


def _unpacked(self: Any, node: Any, count: int) -> list:
    """The items of the value of ``node.value`` (evaluated once) for ``count`` targets, as Python
    unpacks them: a tuple or list of that length, else the error Python gives."""
    value = self.eval_expr(node.value)
    if not isinstance(value, (tuple, list)) and hasattr(value, "__len__") and hasattr(value, "__getitem__") \
            and not isinstance(value, (str, bytes)) and not hasattr(value, "ty"):
        value = list(value)  # a TVM Array (A.shape)
    if not isinstance(value, (tuple, list)):
        kind = f"a {value.ty.dtype} expression" if hasattr(getattr(value, "ty", None), "dtype") else type(value).__name__
        self.report_error(node.value, f"cannot unpack {kind} into {count} names: the right side must be a tuple "
                                      f"of {count} values (a macro returning a tuple, or a, b = x, y)")
    if len(value) != count:
        self.report_error(node.value, f"cannot unpack {len(value)} values into {count} names "
                                      f"({'too many' if len(value) > count else 'not enough'} values to unpack)")
    return list(value)


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
    names = [f"_tl_tuple_value_{serial}_{k}" for k in range(len(targets))]
    if values is None:  # a, b = pair(x): the call once, its items through hidden names
        items = _unpacked(self, node, len(targets))
        values = []
        for k, item in enumerate(items):
            hidden = f"_tl_tuple_item_{serial}_{k}"
            self.var_table.add(hidden, item, allow_shadowing=True)
            values.append(doc.Name(id=hidden, ctx=doc.Load(), **where))
    for name, value in zip(names, values):
        previous(self, doc.Assign(targets=[doc.Name(id=name, ctx=doc.Store(), **where)], value=value, **where))
    for name, target in zip(names, targets):
        previous(self, doc.Assign(targets=[target], value=doc.Name(id=name, ctx=doc.Load(), **where), **where))
    return None


def install() -> None:
    """Register the tuple-assignment form with TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("Assign", _visit_assign)
