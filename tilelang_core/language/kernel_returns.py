"""``return`` in a kernel body: refused with what to write instead.

TVMScript evaluates the value of a ``return`` and stops at a bare one with an empty
``DiagnosticError: error:`` (it evaluates nothing and fails inside its own evaluator); one with a
value becomes a TIR return of the C entry, which the call then reports as a failure. A kernel
writes its results into its tensors and has no value to return, so :func:`install` refuses both,
at the line, saying how to skip the rest of a kernel. A ``return`` of a ``T.macro`` is the
macro's own (language/core.py) and does not reach this visitor.
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import wrap_visitor

__all__ = ["install"]

#: What the error says.
RETURN_TEXT = (
    "return is not supported in a kernel body: a kernel writes its results into its tensors and "
    "has no value to return; to skip the statements after a condition, put them under "
    "`if not cond:` (inside a loop, `break` or `continue` also work)"
)


def _visit_return(previous: Any, self: Any, node: Any) -> Any:
    """Refuse ``node`` (a ``return`` met while parsing a kernel body) at its line."""
    self.report_error(node, RETURN_TEXT)


def install() -> None:
    """Register the refusal of ``return`` with TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("Return", _visit_return)
