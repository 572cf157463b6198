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

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.core import KERNEL_AXIS_KEY
from ..language.tileops._common import static_int, substitute
from .constant_casts import wrapped


def _count(extent: Any, step: Any) -> Any:
    """How many values ``range(start, start + extent, step)`` has, computed in ``extent``'s dtype
    (for a span and step that cannot overflow it: :func:`_stepped` widens them first)."""
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


def _unsigned(value: Any) -> Any:
    """``value`` as the unsigned integer of its width, a literal wrapped around here (TVM refused
    to cast a negative literal to uint: "cannot make uint from negative value")."""
    dtype = str(value.ty.dtype)
    unsigned = "u" + dtype
    v = static_int(value)
    if v is not None:
        return tirx.IntImm(unsigned, wrapped(v, unsigned))
    return tirx.Cast(unsigned, value)


def _rounded_up_quotient(distance: Any, size: Any) -> Any:
    """``distance / size`` of unsigned values, rounded up, without the ``distance + size - 1``
    that wraps around near the type's maximum."""
    dtype = str(distance.ty.dtype)
    zero, one = tirx.IntImm(dtype, 0), tirx.IntImm(dtype, 1)
    return tirx.Div(distance, size) + tirx.Select(tirx.Mod(distance, size) != zero, one, zero)


def _long_count(start: Any, stop: Any, step: Any) -> Any:
    """How many values ``range(start, stop, step)`` of int64 bounds has, without a signed overflow
    (``stop - start`` of ``range(-2**62, 2**62, 2**61)`` overflowed int64) and exact wherever that
    count fits in int64: the distance and the step's magnitude are computed in uint64 (each
    exact, ``-(-2**63)`` included), the count is ``distance / size`` rounded up. The divisor is a
    constant or ``max(size, 1)`` (TVM's simplifier, knowing the step's sign inside a ``Select``
    arm, turned a divisor ``max(step, 1)`` into ``step`` and hoisted the division out of the arm,
    where it divided by 0)."""
    dtype = str(step.ty.dtype)
    unsigned = "u" + dtype
    zero = tirx.IntImm(dtype, 0)
    uzero, uone = tirx.IntImm(unsigned, 0), tirx.IntImm(unsigned, 1)
    ustart, ustop = _unsigned(start), _unsigned(stop)
    s = static_int(step)
    if s is not None:
        positive = s > 0
        distance = ustop - ustart if positive else ustart - ustop
        size = tirx.IntImm(unsigned, abs(s))
        ahead = start < stop if positive else stop < start
    else:
        up = step > zero
        distance = tirx.Select(up, ustop - ustart, ustart - ustop)
        size = tirx.max(tirx.Select(up, _unsigned(step), uzero - _unsigned(step)), uone)
        ahead = tirx.Or(tirx.And(up, start < stop), tirx.And(step < zero, stop < start))
    return tirx.Select(ahead, tirx.Cast(dtype, _rounded_up_quotient(distance, size)), zero)


def _unsigned_count(start: Any, stop: Any, step: Any) -> Any:
    """How many values ``range(start, stop, step)`` of unsigned bounds has, without wrapping
    around: ``(stop - start + step - 1) / step`` wrapped for ``range(0, 4294967295, 2e9)`` of
    uint32 and the loop ran no iteration. The distance is divided and the remainder rounds up;
    the divisor is the constant step or ``max(step, 1)`` (0 iterations for a run-time step of 0)."""
    dtype = str(step.ty.dtype)
    zero, one = tirx.IntImm(dtype, 0), tirx.IntImm(dtype, 1)
    size = step if static_int(step) is not None else tirx.max(step, one)
    ahead = start < stop if static_int(step) is not None else tirx.And(start < stop, step != zero)
    return tirx.Select(ahead, _rounded_up_quotient(stop - start, size), zero)


def _wrapped_constant_range(loop: Any, dtype: str) -> Any:
    """``(start, stop)`` of a loop over constant bounds whose extent wrapped around in its dtype,
    else None. TVMScript makes the extent ``stop - start`` in the loop's dtype:
    ``T.serial(-2000000000, 2000000000)`` got the extent -294967296 and ran no iteration. The
    stop is exact again as ``start + extent`` wrapped, so the true span is ``stop - start``."""
    kind = tvm.DataType(dtype)
    start, extent = static_int(loop.min), static_int(loop.extent)
    if start is None or extent is None or kind.type_code != tvm.DataTypeCode.INT or kind.bits > 32:
        return None
    stop = wrapped(start + extent, dtype)
    return (start, stop) if stop - start != extent else None


def _stop(loop: Any, analyzer: Any) -> Any:
    """The ``stop`` of the ``range`` a loop came from: TVMScript made its extent ``stop - start``
    (in the loop's dtype, wrapping around: ``hi - (-2**63)`` became ``hi + -2**63``)."""
    extent = loop.extent
    if isinstance(extent, tirx.Sub) and tvm_ffi.structural_equal(extent.b, loop.min):
        return extent.a
    try:
        return analyzer.simplify(loop.min + extent)  # lo + 3 + (hi - lo - 3) is hi
    except Exception:  # noqa: BLE001 - TVM's simplifier refused a literal past the dtype's limits
        pass
    dtype = str(extent.ty.dtype)
    start, offset = static_int(loop.min), static_int(getattr(extent, "b", None))
    if isinstance(extent, tirx.Add) and start is not None and offset is not None:
        # hi + -2**63 of a start -2**63: stop is hi + (the two literals added around)
        total = wrapped(start + offset, dtype)
        return extent.a if total == 0 else extent.a + tirx.IntImm(dtype, total)
    return tirx.Cast(dtype, _unsigned(loop.min) + _unsigned(extent))


def _stepped(loop: Any, step: Any, dtype: Any) -> tuple:
    """``(index dtype, count, value of the loop variable at the index)`` of a stepped loop, the
    count computed without a signed overflow (``hi - lo`` and ``(hi + s) - lo - 1`` of int32 bounds
    near the limits overflowed in C, and the loop ran no iteration): in int64 for a loop of 32 bits
    or fewer, then narrowed where the analyzer bounds the count and every ``k * step`` within the
    loop's dtype; else the index is int64 and the value computed in int64 (each value fits the
    loop's dtype). An int64 loop's count comes from :func:`_long_count`."""
    const_extent = static_int(loop.extent)
    s = static_int(step)
    kind = tvm.DataType(dtype)
    if kind.type_code != tvm.DataTypeCode.INT:  # uint32: wraps around without undefined behaviour
        stop = _stop(loop, tvm.sym.Analyzer())
        return dtype, _unsigned_count(loop.min, stop, step), lambda k: loop.min + k * step
    if const_extent is not None and s is not None:
        count = len(range(0, const_extent, s))
        return dtype, tirx.IntImm(dtype, count), lambda k: loop.min + k * step
    analyzer = tvm.sym.Analyzer()
    stop = None if const_extent is not None else _stop(loop, analyzer)
    if kind.bits >= 64:
        count = _count(loop.extent, step) if stop is None else _long_count(loop.min, stop, step)
        if s is not None and analyzer.can_prove(loop.min >= 0 if s > 0 else loop.min <= 0):
            return dtype, count, lambda k: loop.min + k * step  # |k * step| < |stop - start| <= 2**63 - 1
        # k * step overflows int64 where stop - start does (range(-2**62, 2**62, 2**61) at k = 3):
        # computed in uint64, where it wraps around to the value, which fits int64
        return dtype, count, lambda k: tirx.Cast(dtype, _unsigned(loop.min) + _unsigned(k) * _unsigned(step))
    wide = "int64"
    if stop is None:
        span = tirx.IntImm(wide, const_extent)
    else:
        span = tirx.Cast(wide, stop) - tirx.Cast(wide, loop.min)
    wide_step = tirx.Cast(wide, step) if s is None else tirx.IntImm(wide, s)
    count = _count(span, wide_step)
    low, high = -(2 ** (kind.bits - 1)), 2 ** (kind.bits - 1) - 1
    span_bound, count_bound = analyzer.const_int_bound(span), analyzer.const_int_bound(count)
    fits = count_bound.max_value <= high or max(-span_bound.min_value, span_bound.max_value) <= high  # count <= |span|
    if fits and low <= span_bound.min_value and span_bound.max_value <= high:
        # |k * step| < |span|: the narrow arithmetic does not overflow either
        return dtype, tirx.Cast(dtype, count), lambda k: loop.min + k * step
    return wide, count, lambda k: tirx.Cast(dtype, tirx.Cast(wide, loop.min) + k * wide_step)


def _zero_step(loop: Any, location: str) -> LoweringError:
    return LoweringError(f"{location}: the loop over '{loop.loop_var.name}' has step 0; a step must not be 0 "
                         "(as in Python's range)")


def _wide_constant_loop(loop: Any, bounds: tuple, step: Any, dtype: str, location: str) -> Any:
    """A loop over constant ``bounds`` whose span does not fit its dtype
    (:func:`_wrapped_constant_range`), counted from 0 by an int64 index; each value of the loop
    variable, computed in int64, fits its dtype."""
    start, stop = bounds
    wide = "int64"
    s = 1 if step is None else static_int(step)
    if s == 0:
        raise _zero_step(loop, location)
    if s is not None:
        count, wide_step = tirx.IntImm(wide, len(range(start, stop, s))), tirx.IntImm(wide, s)
    else:
        wide_step = tirx.Cast(wide, step)
        count = _count(tirx.IntImm(wide, stop - start), wide_step)
    index = tirx.Var(loop.loop_var.name, wide)
    value = tirx.Cast(dtype, tirx.IntImm(wide, start) + index * wide_step)
    body = substitute(loop.body, [(loop.loop_var, value)])
    return tirx.For(index, tirx.IntImm(wide, 0), count, loop.kind, body, loop.thread_binding, loop.annotations,
                    None, loop.span)


def normalize_loop_steps(func: tirx.PrimFunc, location: str) -> tirx.PrimFunc:
    """``func`` with every stepped loop, and every parallel loop not starting at 0, counting from 0
    by 1 (module docstring).

    :raises LoweringError: a loop whose step is the constant 0.
    """

    def on_for(loop: Any) -> Any:
        step = loop.step
        dtype = str(loop.loop_var.ty.dtype)
        wrapped = None if loop.kind == tirx.ForKind.THREAD_BINDING else _wrapped_constant_range(loop, dtype)
        if wrapped is not None:
            return _wide_constant_loop(loop, wrapped, step, dtype, location)
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
            raise _zero_step(loop, location)
        if stepped and str(step.ty.dtype) != dtype:
            step = tirx.Cast(dtype, step)
        if stepped:
            index_dtype, count, at = _stepped(loop, step, dtype)
            index = tirx.Var(loop.loop_var.name, index_dtype)
            value = at(index)
        else:
            index_dtype, count = dtype, loop.extent
            index = tirx.Var(loop.loop_var.name, dtype)
            value = loop.min + index
        body = substitute(loop.body, [(loop.loop_var, value)])
        return tirx.For(index, tirx.IntImm(index_dtype, 0), count, loop.kind, body, loop.thread_binding,
                        loop.annotations, None, loop.span)

    body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)])
    return func if body.same_as(func.body) else func.with_body(body)


__all__ = ["normalize_loop_steps"]
