"""Warnings that point at the user's line: the first frame outside this package and its plugins.

``warnings.warn(..., stacklevel=N)`` counts frames, and a warning raised deep inside a compile is
reached by several paths (``tilelang.compile``, a ``@tilelang.jit`` call, the autotuner, a hook
called through pluggy), so a fixed ``N`` pointed into this package on all but one of them (a cache
that could not save named ``tilelang_core/jit/compile.py``). :func:`user_stacklevel` walks the stack
instead.
(Python 3.12's ``skip_file_prefixes`` does the same; this package supports 3.10.)
"""

from __future__ import annotations

import sys

#: Top-level modules whose frames are never the user's line: this package, its plugins
#: (``tilelang_backend_*``), and the libraries a compile passes through on its way to them.
_NOT_THE_USERS = frozenset({"tilelang", "tilelang_core", "pluggy", "tvm", "contextlib", "functools", "importlib"})


def _is_ours(module_name: str) -> bool:
    top = module_name.partition(".")[0]
    return top in _NOT_THE_USERS or top.startswith(("tilelang_backend_", "tvm_"))  # tvm_: TVM's FFI package


def _module_name(namespace: dict) -> str:
    """The module's import name: its spec's for ``python -m tilelang_core...`` (``__name__`` is
    ``"__main__"`` there)."""
    spec = namespace.get("__spec__")
    return getattr(spec, "name", None) or namespace.get("__name__") or ""


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes ``warnings.warn`` in the caller of this function name the
    first frame outside this package, its plugins and the libraries in between; the outermost
    frame where every frame is one of those."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and _is_ours(_module_name(frame.f_globals)):
        frame = frame.f_back
        level += 1
    return level

