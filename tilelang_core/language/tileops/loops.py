"""Loop constructs of TileLang: ``T.Serial``, ``T.Unroll``, ``T.Vectorized`` and ``T.loop_break()``.

The capitalised loops are TileLang's names of TVMScript's ``T.serial``, ``T.unroll`` and
``T.vectorized`` (with TileLang's arguments). ``T.loop_break()`` and a plain ``break`` both emit
a marker statement ``call_extern("int32", LOOP_BREAK_CALL, loc, spelling)``;
:mod:`tilelang_core.lowering.loop_control` checks which loop it would leave and turns it into
TIR's ``break`` (``T.break_loop()``), which the C, LLVM and CUDA code generators print as a
``break`` of the innermost loop.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ...errors import LoweringError
from ._common import location

__all__ = ["Serial", "Unroll", "unroll", "Vectorized", "loop_break", "LOOP_BREAK_CALL", "LOOP_CONTINUE_CALL", "install"]

#: Callee name of the marker statement of ``T.loop_break()`` / ``break`` (lowering/loop_control.py).
LOOP_BREAK_CALL = "tl.loop_break"
#: Callee name of the marker statement of ``continue`` (checked by lowering/loop_control.py too).
LOOP_CONTINUE_CALL = "tl.loop_continue"


#: Loop annotation of ``T.Unroll(..., unroll_factor=k)``: the loop stays a serial loop.
UNROLL_FACTOR_KEY = "tl.unroll_factor"


class _ValueLoweringError(LoweringError, ValueError):
    """A bad argument that TileLang reports with ``ValueError``."""


def serial(start: Any, stop: Any = None, step: Any = None, *, annotations: Optional[dict] = None, unroll: Any = None,
           dtype: Any = None):
    """``for i in T.serial(start, stop, step)`` (also ``T.Serial``, TileLang's capitalised name):
    TVMScript's serial loop with TileLang's positional ``step`` (TVMScript takes it by keyword
    only), one iteration after the other on every target; ``range``'s meaning for every step,
    negative ones included (lowering/loop_steps.py)."""
    from ..operand_checks import check_loop_bounds

    check_loop_bounds("T.serial", start=start, stop=stop, step=step)
    return _B.serial(start, stop, annotations=annotations, step=step, unroll=unroll, dtype=dtype)


#: TileLang's capitalised name of :func:`serial`.
Serial = serial


def Unroll(start: Any, stop: Any = None, step: Any = None, *, explicit: bool = False,  # noqa: N802
           unroll_factor: Any = None, annotations: Optional[dict] = None, dtype: Any = None):
    """``for i in T.Unroll(n)`` (also ``T.unroll``): TileLang's unrolled loop.

    ``explicit=True`` asks for the unrolling in the IR (annotation ``pragma_unroll_explicit``, which
    TVM's unroller reads); loops of a static extent are unrolled that way here anyway.
    ``unroll_factor=k`` (an int >= 1; TileLang's ``#pragma unroll k``) keeps the loop: it runs as a
    serial loop annotated :data:`UNROLL_FACTOR_KEY` (the C, LLVM and CUDA compilers unroll small
    loops by themselves), with the same result. ``explicit=True`` and an unroll factor
    (``unroll_factor=`` or the annotation ``pragma_unroll_factor``) cannot be combined.

    :raises LoweringError: (a ``ValueError``) both ``explicit=True`` and an unroll factor, or a
        factor that is not an int >= 1.
    """
    from ..operand_checks import check_loop_bounds

    check_loop_bounds("T.unroll", start=start, stop=stop, step=step)
    annotations = dict(annotations) if annotations else {}
    if explicit:
        annotations["pragma_unroll_explicit"] = True
    if unroll_factor is not None:
        if isinstance(unroll_factor, bool) or not isinstance(unroll_factor, int) or unroll_factor < 1:
            raise _ValueLoweringError(f"{location()}: T.Unroll: unroll_factor must be an int >= 1, got {unroll_factor!r}")
        annotations[UNROLL_FACTOR_KEY] = unroll_factor
    if annotations.get("pragma_unroll_explicit") and ("pragma_unroll_factor" in annotations or UNROLL_FACTOR_KEY in annotations):
        raise _ValueLoweringError(
            f"{location()}: T.Unroll: explicit=True (pragma_unroll_explicit) and an unroll factor (unroll_factor= or pragma_unroll_factor) "
            "cannot be combined: an explicitly unrolled loop has no unroll factor"
        )
    if UNROLL_FACTOR_KEY in annotations:
        return _B.serial(start, stop, annotations=annotations, step=step, dtype=dtype)
    return _B.unroll(start, stop, annotations=annotations or None, step=step, dtype=dtype)


#: TileLang spells the unrolled loop both ways.
unroll = Unroll


def Vectorized(start: Any, stop: Any = None, *, annotations: Optional[dict] = None):  # noqa: N802
    """``for i in T.Vectorized(n)``: TileLang's name of ``T.vectorized`` (lanes of one vector operation)."""
    from ..operand_checks import check_loop_bounds

    check_loop_bounds("T.Vectorized", start=start, stop=stop)
    return _B.vectorized(start, stop, annotations=annotations)


def _innermost_loop_node() -> Any:
    """The AST node of the innermost ``for``/``while`` statement being parsed, else None."""
    from tvm.script.parser.core import doc

    frame = sys._getframe(1)
    try:
        while frame is not None:
            if frame.f_code.co_name in ("visit_for", "visit_while"):
                node = frame.f_locals.get("node")
                if isinstance(node, (doc.For, doc.While)):
                    return node
            frame = frame.f_back
    finally:
        del frame
    return None


def _marker(spelling: str) -> Any:
    """The marker of one ``break``, after the check that needs the kernel's syntax."""
    from tvm.script.parser.core import doc

    loop = _innermost_loop_node()
    target = getattr(loop, "target", None)
    if isinstance(target, (doc.Tuple, doc.List)) and len(target.elts) > 1:
        raise LoweringError(
            f"{location()}: {spelling} inside a for statement with several loop variables (T.grid, T.Parallel(M, N), "
            "...): that statement is a nest of loops, and the break would leave only the innermost one, not the "
            "whole statement as in Python; write one for statement per loop and break out of the one you mean"
        )
    return _marker_call(LOOP_BREAK_CALL, spelling)


def _marker_call(callee: str, spelling: str) -> Any:
    """The marker statement's call ``callee(loc, spelling)``, located at the kernel's line now parsed."""
    return tirx.call_extern("int32", callee, tvm.ir.StringImm(location()), tvm.ir.StringImm(spelling))


def loop_break() -> Any:
    """Leave the innermost enclosing loop (as Python's ``break``, which kernels may also write).

    The loop must be a serial loop of the kernel body: ``T.serial``/``T.Serial``/``range``,
    ``T.Pipelined`` (a serial loop here) or ``while``. Inside ``T.Parallel``, ``T.parallel``,
    ``T.vectorized``, ``T.unroll``, ``T.Persistent``, a thread-bound loop, directly in the body of
    ``T.Kernel`` or outside any loop, lowering raises a ``LoweringError`` at this line; so does a
    ``for`` with several loop variables (``T.grid``), which is a nest of loops. Every target.
    """
    return _marker("T.loop_break()")


_INSTALLED = False


def install() -> None:
    """Make a plain ``break`` in a kernel the same statement as ``T.loop_break()``, and ``continue`` a
    marker that lowering checks (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm.script.parser.core import dispatch

    if dispatch.get(token="tirx", type_name="Break") is None:
        return

    def visit_break(self: Any, node: Any) -> None:  # noqa: ARG001 - TVMScript's visitor signature
        _B.evaluate(_marker("break"))

    def visit_continue(self: Any, node: Any) -> None:  # noqa: ARG001 - TVMScript's visitor signature
        _B.evaluate(_marker_call(LOOP_CONTINUE_CALL, "continue"))

    dispatch.register(token="tirx", type_name="Break")(visit_break)
    if dispatch.get(token="tirx", type_name="Continue") is not None:
        dispatch.register(token="tirx", type_name="Continue")(visit_continue)
    _INSTALLED = True
