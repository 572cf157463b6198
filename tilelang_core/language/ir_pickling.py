"""Pickling or copying a TVM IR object (a ``T.prim_func``, an expression, a ``T.dynamic`` symbol):
a ``TypeError`` saying so, where TVM 0.27 killed the process.

tvm-ffi pickles an object through its JSON graph writer, which stops this TVM build with a
segmentation fault for every IR node tried (``tirx.IntImm`` included); ``copy.copy`` and
``copy.deepcopy`` take the same road. A ``multiprocessing`` pool given a ``T.prim_func`` crashed
the parent in its task-handler thread. :func:`install` gives TVM's IR base class a
``__reduce_ex__`` that raises, naming the object and what pickles instead: the compiled kernel
(``pickle.dumps(kernel)``, docs/jit.md) or the Python function that builds the kernel.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_INSTALLED = False


def _refuse(self: Any, protocol: Any = None) -> Any:
    raise TypeError(
        f"cannot pickle or copy a TVM IR object ({type(self).__module__}.{type(self).__qualname__}): TVM 0.27's "
        "serializer crashes the process on it. Pickle the compiled kernel (tilelang.compile(...) pickles as its "
        "exported files), or send the Python function that builds the kernel and its arguments"
    )


def install() -> None:
    """Make pickling and copying TVM IR nodes raise ``TypeError`` (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm.ir.base import Node

    Node.__reduce_ex__ = _refuse  # type: ignore[method-assign]
    Node.__reduce__ = _refuse  # type: ignore[method-assign]
    _INSTALLED = True
