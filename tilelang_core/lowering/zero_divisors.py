"""Integer divisions by an expression that is always 0, reported at their line.

With ``with T.Kernel(1) as bx`` the block index ``bx`` is always 0, and so is the variable of a
loop of one iteration: ``x // bx``, ``x % bx``, ``T.truncdiv(x, bx)`` or ``x // (bx - bx)``
divide by zero. TVM's simplifiers stop the lowering at such a division with "Check failed:
(!divisor.is_const(0)) is false: Find divide by zero" (or "Divide by zero"), which was reported at
the kernel's ``def`` line. When the lowering stops with that check, :func:`zero_divisor_error`
finds the division (its divisor simplifies to 0 once every loop variable is bound to its range)
and names it, its line and why the divisor is 0. ``T.align_up`` and ``T.ceildiv`` say so while
the kernel is defined (language/zero_divisors.py).
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx

from ..errors import LoweringError
from ..language.core import KERNEL_AXIS_KEY
from ..language.spans import span_to_location
from ..language.tileops._common import collect, static_int
from ..language.zero_divisors import block_index_reason, division_text as _text, integer_divisions

__all__ = ["is_zero_division_failure", "zero_divisor_error"]

#: Texts of TVM's checks that stop at a constant 0 divisor.
_TVM_CHECKS = ("find divide by zero", "divide by zero")


def is_zero_division_failure(text: str) -> bool:
    """Whether a TVM error text is one of its checks of a constant 0 divisor."""
    lowered = text.lower()
    return any(check in lowered for check in _TVM_CHECKS)


def _where(func_body: Any, node: Any, fallback: str) -> str:
    """``file:line`` of the innermost statement with a span that holds ``node``."""
    holders = [s for s in collect(func_body, tirx.Stmt) if any(node.same_as(n) for n in collect(s, type(node)))]
    for stmt in reversed(holders):  # pre-order: the innermost holder comes last
        where = span_to_location(getattr(stmt, "span", None))
        if where:
            return f"{where[0]}:{where[1]}"
    return fallback


def _bind(analyzer: Any, var: Any, value: Any) -> bool:
    """Bind ``var`` to ``value`` (a range or an expression) in ``analyzer``; False where TVM's analysis of
    ``value`` stops at a division by 0 (``for q in T.serial(x // bx)``: the extent divides by ``bx``)."""
    try:
        analyzer.bind(var, value, allow_override=True)
    except tvm.error.InternalError:
        return False
    return True


def zero_divisor_error(func: tirx.PrimFunc, location: str) -> Optional[LoweringError]:
    """The error naming the first integer division of ``func`` whose divisor is always 0 (every
    loop variable bound to its range, ``Bind``/``LetStmt`` variables to their values), or None."""
    divisions = integer_divisions(func.body)
    if not divisions:
        return None
    analyzer = tvm.sym.Analyzer()
    reasons: list = []  # (var, why it is 0)
    for loop in collect(func.body, tirx.For):
        extent = static_int(loop.extent)
        if extent is not None and extent < 1:
            continue  # runs no iteration: its variable has no value
        if not _bind(analyzer, loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent)):
            continue  # its extent divides by a value already known to be 0 (reported below)
        if extent == 1:
            axis = loop.annotations.get(KERNEL_AXIS_KEY)
            why = (block_index_reason(loop.loop_var, int(axis)) if axis is not None
                   else f"{loop.loop_var} is the variable of a loop of one iteration, which is {loop.min}")
            reasons.append((loop.loop_var, why))
    for bind in collect(func.body, (tirx.Bind, tirx.LetStmt)):
        _bind(analyzer, bind.var, bind.value)
    for node in divisions:
        try:
            divisor = analyzer.simplify(node.b)
        except tvm.error.InternalError:  # the divisor holds a division by 0 itself: that one is reported
            continue
        if not (isinstance(divisor, tirx.IntImm) and divisor.value == 0):
            continue
        used = collect(node.b, tvm.ir.Var)
        why = "; ".join(text for var, text in reasons if any(var.same_as(u) for u in used))
        return LoweringError(
            f"{_where(func.body, node, location)}: integer division by zero: the divisor {node.b} of "
            f"{_text(node)} is always 0 here{': ' + why if why else ''}; divide by a value that is at least 1 "
            "(or leave the division out where the divisor is 0)"
        )
    return None
