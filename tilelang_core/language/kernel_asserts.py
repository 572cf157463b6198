"""Python ``assert`` statements in a kernel body: checked as ``T.device_assert`` is.

TVMScript turned ``assert cond, msg`` into a TIR ``AssertStmt``. TVM's host code raises it on
``llvm``, but the C entry points of target ``c`` return -1 for it, which is also the status of a
negative dynamic size (:data:`tilelang_core.calling.NEGATIVE_SIZE`), so the call reported "a
dynamic size of the call is negative"; and ``assert N % 4 == 0`` (no message) stopped the kernel
definition with an empty ``DiagnosticError``. :func:`install` wraps TVMScript's ``tirx`` visitor
of ``assert`` statements:

* a condition that is a Python value or a constant when the kernel is defined (``N % 4 == 0`` of
  a Python ``N``, ``True``, ``T.int32(1)``) is checked then: true, nothing is emitted; false, a
  :class:`KernelAssertionError` names the line, the condition and the message;
* any other condition (a TIR expression) becomes the marker of ``T.device_assert``
  (:mod:`tilelang_core.language.tileops.debug`, lowered per target by
  :mod:`tilelang_core.lowering.device_assert`) with the text ``assert failed at file:line: msg``
  (:data:`tilelang_core.calling.KERNEL_ASSERT_TEXT`; no message: the condition as written), so a
  failed check raises ``RuntimeError("<kernel>() failed: assert failed at ...")`` on every CPU
  backend, traps on CUDA and is dropped on Metal and ROCm;
* TVMScript's tuple message (``assert cond, ("ValueError", ["part", ...])``) keeps TVMScript's
  own handling (a TIR ``AssertStmt`` of that error kind).
"""

from __future__ import annotations

from typing import Any

from ..errors import LoweringError
from .python_conditions import constant_truth
from .spans import source_text
from .tirx_visitors import given_values, wrap_visitor

__all__ = ["KernelAssertionError", "assertion_text", "install"]


class KernelAssertionError(LoweringError, AssertionError):
    """An ``assert`` of a kernel body whose condition is false when the kernel is defined (also an
    ``AssertionError``, as Python's ``assert`` raises)."""


def _message_text(msg: Any) -> str:
    """An evaluated ``assert`` message as text ("" when there is none)."""
    import tvm

    if msg is None:
        return ""
    if isinstance(msg, tvm.ir.StringImm):
        return msg.value
    return msg if isinstance(msg, str) else str(msg)


def assertion_text(where: str, condition_source: str, msg: str = "") -> str:
    """The text a failed kernel ``assert`` reports: ``assert failed at <where>: <msg>``, the
    condition as written (``condition_source``) standing in for an empty ``msg``."""
    from ..calling import KERNEL_ASSERT_TEXT

    return f"{KERNEL_ASSERT_TEXT}{where}: {msg or condition_source}"


def _emit_check(condition: Any, text: str) -> None:
    """Emit ``T.device_assert``'s marker for a run-time ``condition`` with ``text``."""
    import tvm
    from tvm import tirx

    from .operand_checks import as_expression, check_scalar
    from .tileops.debug import emit_check

    condition = as_expression(condition)  # T.alloc_var's wrapper, i == j from a Python helper
    check_scalar("assert", "the condition", condition)  # not a buffer, a region, a string
    if not isinstance(condition, tvm.ir.Expr):  # a number check_scalar accepts (a numpy value)
        condition = tirx.const(bool(condition), "bool")
    emit_check(condition, text)


def _visit_assert(previous: Any, self: Any, node: Any) -> Any:
    """Visit ``assert cond, msg`` (``self`` the parser, ``previous`` TVMScript's visitor)."""
    from .tileops._common import location

    condition = self.eval_expr(node.test)
    msg = self.eval_expr(node.msg) if node.msg is not None else None
    if isinstance(msg, tuple):  # TVMScript's ("ValueError", [parts]): its own AssertStmt
        return _previous_with(previous, self, node, condition, msg)
    where = location()
    source = source_text(self, node.test, "<condition>")
    text = _message_text(msg)
    truth = constant_truth(condition)
    if truth is True:
        return None
    if truth is False:
        raise KernelAssertionError(f"{where}: assert {source}: the assertion is false when the kernel is defined"
                                   + (f": {text}" if text else ""))
    _emit_check(condition, assertion_text(where, source, text))
    return None


def _previous_with(previous: Any, self: Any, node: Any, condition: Any, msg: Any) -> Any:
    """TVMScript's visitor of ``node``, given the condition and message already evaluated (they
    are not evaluated twice)."""
    with given_values(self, (node.test, condition), (node.msg, msg)):
        return previous(self, node)


def install() -> None:
    """Register the ``assert`` statement of kernels with TVMScript's ``tirx`` parser (idempotent)."""
    wrap_visitor("Assert", _visit_assert)
