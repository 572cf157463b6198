"""``T.device_assert``: a check that stops the kernel call when it fails.

``T.device_assert(cond, msg="")`` emits a marker statement
(``call_extern("int32", DEVICE_ASSERT_CALL, cond, text)``, ``text`` = ``"T.device_assert failed
at file:line: msg"``) that :mod:`tilelang_core.lowering.device_assert` lowers per target.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ...calling import DEVICE_ASSERT_TEXT
from ._common import OperandTypeError, check_options, fail, location

#: Callee name of the marker statement.
DEVICE_ASSERT_CALL = "tl.device_assert"


def device_assert(condition: Any, msg: str = "", no_stack_info: bool = False) -> None:
    """Stop the kernel call when ``condition`` is false, with ``msg`` and the kernel line.

    * CPU targets: the call raises ``RuntimeError("<kernel>() failed: T.device_assert failed at
      file:line: msg")`` (the blocks already running finish their work first; what the kernel
      wrote until then stays written).
    * CUDA: the failing thread prints that text and traps, as CUDA's ``assert`` does; the call's
      CUDA error (``unspecified launch failure``) is raised at the next synchronisation, and the
      process's CUDA context is unusable afterwards.
    * Metal and ROCm: not checked (the statement is dropped).

    ``no_stack_info`` is accepted for TileLang compatibility (the text always names the kernel line).
    """
    if isinstance(condition, bool):
        condition = tirx.const(condition, "bool")
    from ..operand_checks import as_expression, check_scalar

    condition = as_expression(condition)  # T.alloc_var's wrapper, i == j from a Python helper
    if not isinstance(condition, tvm.ir.Expr):
        fail("T.device_assert", (condition,), f"the condition must be an expression, got {type(condition).__name__}",
             OperandTypeError)
    check_scalar("T.device_assert", "the condition", condition)  # not a buffer or a region
    if not isinstance(msg, str):
        fail("T.device_assert", (condition, msg), f"msg must be a str, got {type(msg).__name__}", OperandTypeError)
    check_options("T.device_assert", (condition, msg), no_stack_info=no_stack_info)
    emit_check(condition, f"{DEVICE_ASSERT_TEXT}{location()}" + (f": {msg}" if msg else ""))


def emit_check(condition: Any, text: str) -> None:
    """Emit the marker of a run-time check: stop the kernel call with ``text`` where the scalar
    expression ``condition`` (a number: tested against 0) is false. ``T.device_assert`` and a
    kernel's ``assert`` statement (language/kernel_asserts.py) emit it after checking their operands."""
    if str(condition.dtype) != "bool":
        condition = condition != tirx.const(0, str(condition.dtype))
    _B.evaluate(tirx.call_extern("int32", DEVICE_ASSERT_CALL, condition, tvm.ir.StringImm(text)))
