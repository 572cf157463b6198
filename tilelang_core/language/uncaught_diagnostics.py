"""Show the message of a kernel's uncaught ``DiagnosticError``.

``import tvm`` puts a wrapper around ``sys.excepthook`` that prints, for an uncaught
``tvm.error.DiagnosticError``, only ``note: run with `TVM_BACKTRACE=1` ...``: it expects the
diagnostic to have been printed already, which TVM 0.27's TVMScript parser no longer does (it
puts the formatted diagnostic in the exception and raises it). So a script whose kernel has a
mistake that TVMScript reports (an undefined name, mismatched types) ended with that note and
nothing else. :func:`install` wraps the hook once more: such an error prints its message (the
``error: ...`` line and the marked source lines, on stderr) before TVM's note. Where TVM prints
the whole traceback instead (``TVM_BACKTRACE=1``, or under pytest) nothing is added.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tvm import error as _tvm_error

__all__ = ["install", "shows_traceback"]

_MARK = "_tilelang_shows_diagnostics"


def shows_traceback() -> bool:
    """Whether TVM's hook prints the whole traceback itself (``TVM_BACKTRACE=1``, or under pytest)."""
    if "PYTEST_CURRENT_TEST" in os.environ:
        return True
    try:
        return bool(int(os.environ.get("TVM_BACKTRACE", "0")))
    except ValueError:
        return False


def install() -> None:
    """Wrap the current ``sys.excepthook`` (idempotent; a hook set later by the user stays theirs)."""
    current = sys.excepthook
    if getattr(current, _MARK, False):
        return

    def excepthook(exctype: type, value: BaseException, traceback: Any) -> None:
        if exctype is _tvm_error.DiagnosticError and not shows_traceback():
            sys.stderr.write(f"{exctype.__module__}.{exctype.__qualname__}: {value}\n")
            sys.stderr.flush()
        current(exctype, value, traceback)

    setattr(excepthook, _MARK, True)
    sys.excepthook = excepthook
