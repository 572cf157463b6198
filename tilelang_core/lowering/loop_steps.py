"""Loops with a step other than 1, and parallel loops that do not start at 0, become loops over
their iteration count from 0.

TVM 0.27's ``For`` carries a ``step``, but its passes and code generators do not all honour it:
``UnrollLoop`` and the vectorizer dropped it (``T.unroll(0, 7, 2)`` ran ``i = 0 .. 6``), and the
C and LLVM code generators print ``for (i = start; i < stop; i += step)``, so a negative step
(``range(10, 0, -3)``) ran no iteration, or never ended when ``stop`` was above ``start``. The LLVM
code generator refuses a parallel loop that does not start at 0.

:func:`normalize_loop_steps` rewrites every such loop, of every kind, as Python's ``range`` runs
it: ``for k in range(count): i = start + k * step`` with ``count`` the number of values
``range(start, stop, step)`` has (0 when ``step`` has the wrong sign for the interval). A step of
0 known when the kernel is defined is a :class:`~tilelang_core.errors.LoweringError` (Python's
``range`` refuses it); one known only at run time gives no iteration. A loop whose start lies past
its stop by a constant, or at it (``T.unroll(6, 5)``, ``T.vectorized(3, 3)``), is dropped: TVM's
``UnrollLoop`` stopped with "Cannot unroll non-constant loop" on the negative extent, and its
vectorizer on CUDA with "Failed to vectorize loop with extent 0".
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.core import KERNEL_AXIS_KEY
from ..language.tileops._common import static_int, substitute


def _count(extent: Any, step: Any) -> Any:
    """How many values ``range(start, start + extent, step)`` has."""
    dtype = str(extent.ty.dtype)
    one = tirx.IntImm(dtype, 1)
    zero = tirx.IntImm(dtype, 0)
    s = static_int(step)
    if s is not None:
        if s > 0:
            return tirx.max(tirx.floordiv(extent + (s - 1), tirx.IntImm(dtype, s)), zero)
        return tirx.max(tirx.floordiv(-extent + (-s - 1), tirx.IntImm(dtype, -s)), zero)
    # a run-time step: |extent| over |step| when their signs agree; never a division by 0
    positive = step > zero
    span = tirx.Select(positive, extent, -extent)
    size = tirx.Select(positive, step, -step)
    count = tirx.floordiv(span + size - one, tirx.max(size, one))
    return tirx.Select(step == zero, zero, tirx.max(count, zero))


def normalize_loop_steps(func: tirx.PrimFunc, location: str) -> tirx.PrimFunc:
    """``func`` with every stepped loop, and every parallel loop not starting at 0, counting from 0
    by 1 (module docstring).

    :raises LoweringError: a loop whose step is the constant 0.
    """

    def on_for(loop: Any) -> Any:
        step = loop.step
        stepped = step is not None and static_int(step) != 1
        shifted = loop.kind == tirx.ForKind.PARALLEL and static_int(loop.min) != 0
        empty = static_int(loop.extent)
        if (not stepped and empty is not None and empty <= 0 and loop.kind != tirx.ForKind.THREAD_BINDING
                and KERNEL_AXIS_KEY not in loop.annotations):
            # range(6, 5): no iteration (TVM's UnrollLoop refused the negative extent, its vectorizer an empty loop).
            # The grid loops of T.Kernel(0) stay: the frontend needs every axis, and a GPU target
            # launches the kernel's empty grid, which backends skip, as a dynamic grid of 0
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        if not stepped and not shifted:
            return loop
        if stepped and static_int(step) == 0:
            raise LoweringError(f"{location}: the loop over '{loop.loop_var.name}' has step 0; a step must not be 0 "
                                "(as in Python's range)")
        dtype = str(loop.loop_var.ty.dtype)
        if stepped and str(step.ty.dtype) != dtype:
            step = tirx.Cast(dtype, step)
        count = _count(loop.extent, step) if stepped else loop.extent
        index = tirx.Var(loop.loop_var.name, dtype)
        value = loop.min + index * step if stepped else loop.min + index
        body = substitute(loop.body, [(loop.loop_var, value)])
        return tirx.For(index, tirx.IntImm(dtype, 0), count, loop.kind, body, loop.thread_binding, loop.annotations,
                        None, loop.span)

    body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)])
    return func if body.same_as(func.body) else func.with_body(body)


__all__ = ["normalize_loop_steps"]
