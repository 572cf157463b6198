"""Warnings that point at the user's line: the first frame outside this package and its plugins.

``warnings.warn(..., stacklevel=N)`` counts frames, and a warning raised deep inside a compile is
reached by several paths (``tilelang.compile``, a ``@tilelang.jit`` call, the autotuner, a hook
called through pluggy), so a fixed ``N`` pointed into this package on all but one of them (a cache
that could not save named ``tilelang_core/jit/compile.py``). :func:`user_stacklevel` walks the stack
instead.
(Python 3.12's ``skip_file_prefixes`` does the same; this package supports 3.10.)

A warning raised on a worker thread of :func:`tilelang.par_compile` (or an autotune, which builds
through it) has no user's frame on its stack: the thread starts in ``threading.py``. The worker
runs each job inside :func:`warnings_at`, with the location of the line that called
``par_compile``, and :func:`warn` names that line there.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from typing import Iterator, NamedTuple, Optional

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


def _first_user_frame(frame):
    """``(frame, frames walked)``: the first frame from ``frame`` outwards that is the user's, or the
    outermost one."""
    level = 1
    while frame.f_back is not None and _is_ours(_module_name(frame.f_globals)):
        frame = frame.f_back
        level += 1
    return frame, level


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes ``warnings.warn`` in the caller of this function name the
    first frame outside this package, its plugins and the libraries in between; the outermost
    frame where every frame is one of those."""
    return _first_user_frame(sys._getframe(1))[1]


class Location(NamedTuple):
    """Where a warning is shown to have been raised: a line of the user's code."""

    filename: str
    lineno: int
    module_globals: dict


_worker = threading.local()


def _users_line(frame) -> Optional[Location]:
    """The line :func:`warn` names for a walk that ended at ``frame``: ``frame``'s, or, where
    ``frame`` is not the user's (the bottom of a worker thread), the one :func:`warnings_at` gave."""
    given = getattr(_worker, "location", None)
    if given is not None and (frame.f_back is None or _module_name(frame.f_globals) == "threading"):
        return given
    return None


def user_location() -> Location:
    """The line of the user's code that called into this package: the first frame outside it on
    the caller's stack (as :func:`user_stacklevel` walks it), or on a worker thread the line
    :func:`warnings_at` gave."""
    frame = _first_user_frame(sys._getframe(1))[0]
    return _users_line(frame) or Location(frame.f_code.co_filename, frame.f_lineno, frame.f_globals)


@contextlib.contextmanager
def warnings_at(location: Location) -> Iterator[None]:
    """Within this block, on this thread, a :func:`warn` whose stack reaches no user's frame (a
    worker thread's job) names ``location``."""
    previous = getattr(_worker, "location", None)
    _worker.location = location
    try:
        yield
    finally:
        _worker.location = previous


def warn(message: "str | Warning", category: type = UserWarning) -> None:
    """``warnings.warn`` naming the user's line: the first frame outside this package on the
    caller's stack, or, on a worker thread whose stack has none, the line :func:`warnings_at`
    gave."""
    frame, level = _first_user_frame(sys._getframe(1))
    given = _users_line(frame)
    if given is None:
        warnings.warn(message, category, stacklevel=level + 1)
        return
    where = given.module_globals
    warnings.warn_explicit(message, category, given.filename, given.lineno, module=where.get("__name__", "<string>"),
                           registry=where.setdefault("__warningregistry__", {}), module_globals=where)
