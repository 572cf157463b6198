"""``raise`` in a kernel body: raised when the kernel is parsed, as in TileLang.

Kernels choose code by Python values when they are parsed (``if op == "add": ... else: raise
ValueError(f"unknown op {op}")``). TVMScript has no visitor for ``raise`` and stopped the kernel
with "Visitor of AST node is not implemented: Raise", marking the whole enclosing ``if``; TileLang
raises the exception, so a caller's ``except ValueError`` sees it.

:func:`visit_raise` is the parser's visitor (registered with the other statements'
visitors, :mod:`.python_statements`): the exception is evaluated and raised as itself (``raise X
from Y`` keeps its cause), marked so that the kernel's decorator lets it through TVMScript's
diagnostic (:func:`is_kernel_raise`). A ``raise`` inside a branch or loop that the kernel runs
(``if A[i] < 0:``, ``while``) is refused at its line: nothing raises while a kernel runs, and
raising at parse time would stop every kernel, whatever the data; ``T.device_assert`` is the
run-time check. Plain ``for`` loops are unrolled or run in order, so a ``raise`` there is reached
when parsing reaches it, as in Python.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_kernel_raise", "refusal_marker", "visit_raise"]

_MARK = "__tilelang_kernel_raise__"
#: A ``raise "<marker><text>"`` that other front-end rewrites emit: refused at its line with <text>.
_REFUSAL = "\x00tilelang refuses: "


def refusal_marker(text: str) -> str:
    """The constant a synthesized ``raise`` carries so that its visitor refuses the statement at
    its line with ``text`` (used by :mod:`.match_statements`)."""
    return _REFUSAL + text


def is_kernel_raise(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a ``raise`` statement of a kernel body."""
    return bool(getattr(exc, _MARK, False))


def _run_time_frame() -> Any:
    """The innermost IR builder frame of a branch or ``while`` loop the kernel runs, or None."""
    from tvm.script.ir_builder.base import IRBuilder
    from tvm.tirx.script.builder import frame

    if not IRBuilder.is_in_scope():
        return None
    for built in reversed(list(IRBuilder.current().frames)):
        if isinstance(built, (frame.IfFrame, frame.ThenFrame, frame.ElseFrame, frame.WhileFrame)):
            return built
    return None


def visit_raise(self: Any, node: Any) -> None:
    """TVMScript's parser visitor of ``raise`` (module docstring); registered by
    :func:`tilelang_core.language.python_statements.install`."""
    from tvm.script.parser._core import doc

    exc = node.exc
    if isinstance(exc, doc.Constant) and isinstance(exc.value, str) and exc.value.startswith(_REFUSAL):
        self.report_error(node, exc.value[len(_REFUSAL):])
    if exc is None:
        self.report_error(node, "a bare raise (re-raise) has no exception to raise in a kernel body: "
                                "raise an exception object, e.g. raise ValueError(\"...\")")
    if _run_time_frame() is not None:
        self.report_error(node, "raise inside an if or while that the kernel runs: nothing raises while a kernel "
                                "runs, and raising when it is parsed would stop every kernel whatever the data; "
                                "check a run-time condition with T.device_assert(cond, msg), or raise in a branch "
                                "chosen by a Python value (if mode == \"x\": raise ...)")
    value = self.eval_expr(exc)
    cause = self.eval_expr(node.cause) if node.cause is not None else None
    if isinstance(value, type) and issubclass(value, BaseException):
        value = value()
    if not isinstance(value, BaseException):
        self.report_error(node, f"raise needs an exception, got {type(value).__name__} {value!r}")
    try:
        setattr(value, _MARK, True)
    except (AttributeError, TypeError):  # an exception type with __slots__: raised unmarked
        pass
    if node.cause is not None:
        raise value from cause
    raise value
