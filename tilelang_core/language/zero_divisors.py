"""Divisors that are always 0 because of the kernel's launch: ``bx`` of ``with T.Kernel(1) as bx``.

The block index of a grid axis of one block is always 0, so ``T.align_up(x, bx)`` or
``T.ceildiv(x, bx)`` there divides by zero. TVM's simplifier stopped the lowering at it with
"Check failed: (!divisor.is_const(0)) is false: Find divide by zero", reported at the kernel's
``def`` line. :func:`always_zero` tells those operators, while the kernel is defined, that their
divisor is 0 and why; lowering/zero_divisors.py reports the other integer divisions (``x // bx``,
``x % bx``) at their line.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional

__all__ = ["always_zero", "block_index_reason", "division_text", "integer_divisions", "zero_division"]

_AXES = "xyz"


def block_index_reason(var: Any, axis: int) -> str:
    """Why the block index ``var`` of grid axis ``axis`` (0, 1, 2) is always 0: its grid has one block."""
    return f"{var} is the block index of a grid of one block along {_AXES[axis]}"


def always_zero(expr: Any) -> Optional[str]:
    """Why the integer expression ``expr`` is always 0 inside the body of the enclosing
    ``T.Kernel`` (a block index of an axis of one block in it, or an expression such as
    ``bx - bx`` that simplifies to 0 anywhere), or None when it may be another value or is a
    constant (checked by the operators themselves)."""
    import tvm
    from tvm import tirx

    from .core import current_kernel
    from .tileops._common import collect

    if not tvm.ir.is_prim_expr(expr) or isinstance(expr, tirx.IntImm):
        return None
    kernel = current_kernel()
    block_vars = getattr(kernel, "block_vars", ())
    used = collect(expr, tvm.ir.Var)
    axes = [(axis, var) for axis, (var, extent) in enumerate(zip(block_vars, kernel.grid if kernel else ()))
            if isinstance(extent, Integral) and extent == 1 and any(var.same_as(u) for u in used)]
    analyzer = tvm.sym.Analyzer()
    for _axis, var in axes:
        analyzer.bind(var, tvm.ir.Range.from_min_extent(0, 1))
    simplified = analyzer.simplify(expr)
    if not (isinstance(simplified, tirx.IntImm) and simplified.value == 0):
        return None
    if not axes:  # bx - bx: TVM folds T.align_up(x, bx - bx) to 0, with no division left to report
        return f"{expr} simplifies to 0"
    return "; ".join(block_index_reason(var, axis) for axis, var in axes)


def _operand(expr: Any) -> str:
    """``expr`` as an operand of ``//`` or ``%``: in parentheses unless it is a name, a constant or a load."""
    import tvm
    from tvm import tirx

    text = str(expr)
    return text if isinstance(expr, (tvm.ir.Var, tirx.IntImm, tvm.ir.TensorLoad)) else f"({text})"


def division_text(node: Any) -> str:
    """The integer division ``node`` as the kernel author writes it (``x // (bx - bx)``, ``T.truncdiv(x, i)``)."""
    from tvm import tirx

    a, b = node.a, node.b
    if isinstance(node, (tirx.FloorDiv, tirx.FloorMod)):
        a, b = _operand(a), _operand(b)
    if isinstance(node, tirx.FloorDiv):
        return f"{a} // {b}"
    if isinstance(node, tirx.FloorMod):
        return f"{a} % {b}"
    return f"T.{'truncdiv' if isinstance(node, tirx.Div) else 'truncmod'}({a}, {b})"


def integer_divisions(node: Any) -> list:
    """The integer divisions in ``node`` (an expression or a statement): ``//``, ``%``,
    ``T.truncdiv`` and ``T.truncmod`` of integer (or unsigned) operands, outer ones first."""
    import tvm
    from tvm import tirx

    from .tileops._common import collect

    integer = (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT)
    return [d for d in collect(node, (tirx.FloorDiv, tirx.FloorMod, tirx.Div, tirx.Mod))
            if tvm.DataType(str(d.ty.dtype)).type_code in integer]


def zero_division(expr: Any) -> Optional[str]:
    """Why ``expr`` (a loop bound, say) holds an integer division by a divisor that is always 0
    (:func:`always_zero`), naming the division, or None. TVM's builders stop at such a bound
    with "Check failed: (!divisor.is_const(0)) is false: Find divide by zero"."""
    import tvm

    if not tvm.ir.is_prim_expr(expr):
        return None
    for node in integer_divisions(expr):
        reason = always_zero(node.b)
        if reason is not None:
            return f"integer division by zero: the divisor {node.b} of {division_text(node)} is always 0 here: {reason}"
    return None
