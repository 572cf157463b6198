"""Reading the marker calls that the kernel language leaves in the IR.

Tile operators, intrinsics and kernel constructs that lowering finishes later are emitted as
``call_extern(dtype, NAME, *args)``: a call whose first argument is the marker's name
(``T.Parallel``'s ``tl.parallel``, ``T.print``'s, the atomics', ...). The functions here are the
one place that recognises them; each family reads its own arguments.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx

from ..language.core import PARALLEL_MARKER
from ..language.tileops._common import static_int
from ..language.tileops.safe_value import SAFE_VALUE_CALL


def extern_name(expr: Any) -> Optional[str]:
    """The function name of a ``call_extern(dtype, name, *args)`` call (a marker's or a real
    external function's, such as a ``T.call_extern``), else None."""
    if not isinstance(expr, tvm.ir.Call) or getattr(expr.op, "name", "") != "tirx.call_extern" or not expr.args:
        return None
    head = expr.args[0]
    return str(head.value) if isinstance(head, tvm.ir.StringImm) else None


def marker_call_args(expr: Any, name: str) -> Optional[list]:
    """The arguments after ``name`` of a marker call ``call_extern(dtype, name, *args)``, else None."""
    if extern_name(expr) != name:
        return None
    return list(expr.args[1:])


def marker_args(stmt: Any, name: str, count: Optional[int] = None) -> Optional[list]:
    """The arguments of a marker statement ``Evaluate(call_extern(dtype, name, *args))`` (``count``
    of them when given), else None."""
    if not isinstance(stmt, tirx.Evaluate):
        return None
    args = marker_call_args(stmt.value, name)
    return None if args is None or (count is not None and len(args) != count) else args


def parallel_ndim(stmt: Any) -> Optional[int]:
    """The loop count of a ``T.Parallel`` marker statement (its loop nest follows it), else None."""
    args = marker_args(stmt, PARALLEL_MARKER, 1)
    return None if args is None else static_int(args[0])


def parallel_loops(loop: Any, ndim: int) -> list:
    """The loops of the ``T.Parallel`` nest that starts at ``loop`` (the statement after its
    marker): ``ndim`` perfectly nested loops, fewer when the nest is malformed."""
    loops = [loop]
    while len(loops) < ndim and isinstance(loops[-1].body, tirx.For):
        loops.append(loops[-1].body)
    return loops


def safe_value_marker(stmt: Any) -> Optional[tuple]:
    """``(buffer, value)`` of a ``T.annotate_safe_value`` marker statement, else None."""
    args = marker_args(stmt, SAFE_VALUE_CALL, 2)
    return None if args is None else (args[0].args[0].source, args[1])
