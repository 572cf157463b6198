"""Which buffer owns the storage of a view, for the GPU passes that follow ``T.view``/``T.reshape``.

A view (``T.view``, ``T.reshape``, also ``StorageRewrite``'s merged ``T.alloc_var`` scalars) is a
``DeclBuffer`` whose data is ``buffer_data(B)`` of the buffer ``B`` it is on; ``B`` may itself be a
view (a view of a view). The passes that compare storages (lowering/shared_hazards.py,
lowering/fragments.py, lowering/thread_uniform.py) ask the same three questions:

* :func:`owner_of`: the buffer a data expression names (:func:`data_buffers`: every one in an
  expression);
* :func:`with_owners`: some buffers plus every owner up their view chains;
* :func:`view_roots`: the allocated buffer at the end of each view's chain.
"""

from __future__ import annotations

from typing import Any

import tvm

from ..language.tileops._common import collect, contains

__all__ = ["owner_of", "data_buffers", "with_owners", "view_roots"]

_BUFFER_DATA_OP = "tirx.buffer_data"


def owner_of(data: Any, default: Any = None) -> Any:
    """The buffer ``data`` is the storage of (``buffer_data(B)``, a buffer's ``.data`` or a
    ``DeclBuffer``'s data: ``B``), else ``default`` (a pointer variable, an expression)."""
    if isinstance(data, tvm.ir.Call) and getattr(data.op, "name", "") == _BUFFER_DATA_OP:
        return data.args[0]
    return default


def data_buffers(expr: Any) -> list:
    """The buffers whose data ``expr`` passes (each ``buffer_data(B)`` in it: ``B``), in walk order."""
    return [owner_of(call) for call in collect(expr, tvm.ir.Call) if owner_of(call) is not None]


def with_owners(items: list, owners: list) -> list:
    """``items`` (buffers, data variables) followed by the owner of each view among them, that
    owner's owner for a view of a view, and so on, each once. ``owners``: ``(view, owner)`` pairs,
    one per ``DeclBuffer`` (a view on a plain pointer owned by that pointer variable)."""
    out = list(items)
    for _ in range(len(owners)):
        more = [o for w in out for b, o in owners if b.same_as(w) and not any(o.same_as(x) for x in out)]
        if not more:
            break
        out += more
    return out


def view_roots(owners: list, allocated: list) -> list:
    """``(buffer, root)``: every buffer of ``allocated`` with itself, then every view whose chain
    of ``owners`` (``(view, owner or None)`` pairs) ends at one of them, with that buffer. A view
    whose chain ends elsewhere (a pointer, a buffer not in ``allocated``) is left out."""
    out = [(b, b) for b in allocated]
    for _ in range(len(owners)):  # a view of a view: its root once the inner one's is known
        more = [(v, root) for v, owner in owners if not contains([b for b, _ in out], v)
                for b, root in out if owner is not None and owner.same_as(b)]
        if not more:
            break
        out += more
    return out
