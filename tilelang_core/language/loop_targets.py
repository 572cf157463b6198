"""The names of a ``for`` statement against the loop variables of its iterator.

``for i, j in T.Parallel(16, 16, 1)`` (three extents, two names) stopped TVMScript with Python's
"too many values to unpack (expected 2)", and ``for i, j, l in T.Parallel(16, 16)`` or
``for i, j in T.serial(16)`` with "not enough values to unpack" or "Type ir.PrimType does not
support subscript": no operator, nothing said about extents. :func:`install` wraps TVMScript's
``tirx`` ``for`` visitor: when the target is a tuple of names (``i, j``), the number of names must
be the number of loop variables the iterator gives (one per extent of ``T.Parallel``/``T.grid``,
one for ``T.serial``/``T.Pipelined``/``range``), else a
:class:`~tilelang_core.errors.LoweringError` at the ``for`` line names the iterator, both counts
and what to change. A single name (``for i in T.serial(16)``) keeps TVMScript's handling.
"""

from __future__ import annotations

from typing import Any

import tvm

from .tirx_visitors import assign_hook, wrap_visitor

__all__ = ["check_loop_names", "install"]


def _spelling(node: Any, doc: Any) -> str:
    """How the kernel spells the iterator's callee (``T.Parallel``, ``range``), or ``the iterator``."""
    func = node.func if isinstance(node, doc.Call) else None
    parts = []
    while isinstance(func, doc.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, doc.Name):
        parts.append(func.id)
        return ".".join(reversed(parts))
    return "the iterator"


def check_loop_names(op: str, names: list[str], loop_vars: Any) -> None:
    """Refuse a ``for`` statement whose tuple of ``names`` does not match ``loop_vars`` (the
    iterator's variables: one variable, or a list of them), naming ``op`` (the iterator)."""
    from ..errors import LoweringError
    from .tileops._common import location

    single = isinstance(loop_vars, tvm.ir.Expr)
    count = 1 if single else len(loop_vars)
    if count == len(names) and not single:
        return
    given = ", ".join(names)
    plural = "s" if count != 1 else ""
    if op.endswith(("Parallel", "grid")):
        gives = f"{count} extent{plural} give{'' if plural else 's'} {count} loop variable{plural}"
    else:
        gives = f"it gives {count} loop variable{plural}"
    if single and len(names) == 1:
        raise LoweringError(f"{location()}: {op}: {gives}, not a tuple, but the for statement unpacks it into "
                            f"({given},); write for {given} in {op}(...)")
    fix = "name one variable per extent or give one extent per name" if op.endswith(("Parallel", "grid")) \
        else "name one variable (T.grid and T.Parallel give one per extent)"
    raise LoweringError(f"{location()}: {op}: {gives}, but the for statement names {len(names)} ({given}); {fix}")


def _visit_for(previous: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    target = node.target
    if not isinstance(target, (doc.Tuple, doc.List)):
        return previous(self, node)
    names = [t.id if isinstance(t, doc.Name) else "(...)" for t in target.elts]
    op = _spelling(node.iter, doc)
    # only this statement's target is checked; nested fors hook their own
    with assign_hook(self, target, lambda bound: check_loop_names(op, names, bound.get("source"))):
        return previous(self, node)


def install() -> None:
    """Wrap TVMScript's ``tirx`` ``for`` visitor with the name-count check (idempotent)."""
    wrap_visitor("For", _visit_for)
