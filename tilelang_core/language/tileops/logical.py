"""Logical reductions: ``T.any_of(x)`` and ``T.all_of(x)``.

Each is a ``bool`` expression: whether any (all) of the elements of ``x`` is nonzero. ``x`` is
a buffer (every element, any rank) or a region whose dimensions are single indices except the
last, which may be a slice (``Mask[by, bx, k, :]``, ``M[i, 0:n]``).

The result is a marker call ``call_extern("bool", LOGICAL_CALL, kind, loc, x[start], *extents)``
that :mod:`tilelang_core.lowering.logical` lowers on every target: over at most
:data:`TREE_LIMIT` elements known when the kernel is lowered, to the elements' tests combined by a
balanced tree of ``||`` (``&&``); otherwise to a loop computing the value into a local flag, placed
right before the statement that uses it. Where a loop cannot go there (the condition of a
``while`` loop, a loop bound), a static extent becomes the expression tree and a run-time extent
is a :class:`~tilelang_core.errors.LoweringError`.
"""

from __future__ import annotations

from typing import Any, Sequence

import tvm
from tvm import tirx

from ._common import OperandTypeError, describe, fail, is_buffer, is_unit, location, static_int

__all__ = ["any_of", "all_of", "LOGICAL_CALL", "TREE_LIMIT", "combine", "element_test", "region_elements"]

#: Callee name of the marker call (lowering/logical.py).
LOGICAL_CALL = "tl.logical_reduce"
#: Largest static element count written as an expression tree; larger (and run-time) counts
#: become a loop before the statement (lowering/logical.py).
TREE_LIMIT = 32

_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "bfloat16", "float32", "float64")


def element_test(value: Any) -> Any:
    """``value != 0`` as a ``bool`` expression (the value itself for booleans; NaN counts as nonzero)."""
    dtype = str(value.ty.dtype)
    if dtype == "bool":
        return value
    if dtype.startswith(("float", "bfloat")):
        return value != tirx.FloatImm(dtype, 0.0)
    return value != tirx.IntImm(dtype, 0)


def combine(kind: str, tests: Sequence[Any]) -> Any:
    """The tests joined by ``||`` (``kind == "any"``) or ``&&`` (``"all"``) as a balanced tree
    (depth ``log2(n)``); no tests: false for ``any``, true for ``all``."""
    items = list(tests)
    if not items:
        return tirx.IntImm("bool", 1 if kind == "all" else 0)
    join = tirx.Or if kind == "any" else tirx.And
    while len(items) > 1:
        items = [join(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def region_elements(buffer: Any, starts: Sequence[Any], extents: Sequence[Any]) -> list:
    """Loads of every element of a region with static ``extents``, in row-major order."""
    points: list = [[]]
    for start, extent in zip(starts, extents):
        count = static_int(extent)
        if is_unit(extent):
            points = [p + [start] for p in points]
            continue
        points = [p + [start + k if static_int(start) != 0 else tirx.IntImm(_index_dtype(start, extent), k)]
                  for p in points for k in range(count)]
    return [buffer[tuple(p)] for p in points]


def _index_dtype(start: Any, extent: Any) -> str:
    for value in (start, extent):
        if isinstance(value, tvm.ir.Expr):
            return str(value.ty.dtype)
    return "int32"


def _operand(op: str, value: Any) -> tuple:
    """``(buffer, starts, extents)`` of the operand, or a clear error naming ``op``."""
    if is_buffer(value):
        shape = list(value.ty.shape)
        return value, [tirx.IntImm(_index_dtype(s, s), 0) for s in shape], shape
    kind = type(value).__name__
    if kind == "TensorRegion":
        starts = [r.min for r in value.region]
        extents = [r.extent for r in value.region]
        for dim, extent in enumerate(extents[:-1]):
            if not is_unit(extent):
                fail(op, (value,), f"only the last dimension may be a slice: give single indices on the others "
                     f"(as Mask[by, bx, k, :]), got extent {describe(extent)} on dimension {dim} of {describe(value)}")
        return value.source, starts, extents
    if kind == "TensorLoad":
        fail(op, (value,), f"expects a buffer or a region such as {describe(value.source)}[i, 0:n], got the single "
             f"element {describe(value)} (compare it with 0 instead)", OperandTypeError)
    fail(op, (value,), f"expects a buffer or a region such as M[i, 0:n], got {kind} {describe(value)}", OperandTypeError)
    raise AssertionError  # unreachable


def _reduce(kind: str, value: Any) -> Any:
    op = f"T.{kind}_of"
    value = getattr(value, "scalar", value)  # TVMScript's scalar wrapper (T.alloc_var): refused below
    buffer, starts, extents = _operand(op, value)
    dtype = str(buffer.ty.dtype)
    if dtype not in _DTYPES:
        fail(op, (value,), f"needs bool, integer or float16/bfloat16/float32/float64 elements, got {dtype}",
             OperandTypeError)
    extents = [tirx.IntImm("int32", e) if isinstance(e, int) else e for e in extents]
    return tirx.call_extern("bool", LOGICAL_CALL, tvm.ir.StringImm(kind), tvm.ir.StringImm(location()),
                            buffer[tuple(starts)], *extents)


def any_of(buffer: Any) -> Any:
    """Whether some element of ``buffer`` is nonzero (true), as a ``bool`` expression.

    ``buffer`` is a buffer (every element) or a region with a slice on its last dimension only
    (``T.any_of(Mask[by, bx, k, :])``, ``T.any_of(M[i, 0:n])``). Elements may be bool, integers
    or floats (NaN counts as nonzero); an empty region gives false. Extents may be dynamic. Works
    in ``if`` conditions and in expressions on every target; a run-time extent cannot be the
    condition of a ``while`` loop (a ``LoweringError`` says so).
    """
    return _reduce("any", buffer)


def all_of(buffer: Any) -> Any:
    """Whether every element of ``buffer`` is nonzero (true), as a ``bool`` expression.

    Operands as :func:`any_of`; an empty region gives true.
    """
    return _reduce("all", buffer)
