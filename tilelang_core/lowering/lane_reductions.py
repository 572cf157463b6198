"""Float reductions of ``T.reduce_*`` on CPU targets: several partial results at once.

A row sum written as one accumulator, ``for r: acc = acc + x[r]``, is a chain of dependent float
operations: each waits for the one before (3-4 cycles), and a C or LLVM compiler may not reorder
float additions (nor NaN-aware maxima), so it cannot use SIMD either. ``T.reduce_sum``,
``reduce_abssum``, ``reduce_max``, ``reduce_min`` and ``reduce_absmax`` with a float destination
mark their reduction loop with :data:`~tilelang_core.language.tileops.reduce.LANE_REDUCE` (the
order in which a reduction takes its elements is not part of its meaning: on GPUs the threads'
partial results meet as a tree). On CPU targets :func:`split_lane_reductions` rewrites such a
loop ``for r in range(E): d[i] = combine(d[i], f(r))`` into

* ``L`` partial results (``L`` = :func:`lanes`: 32 float32, 16 float64 values), each started at
  the reduction's identity (``-0.0`` for sums, the identity of IEEE addition, so that a sum of
  negative zeros stays ``-0.0``; ``-inf`` for max, ``+inf`` for min, ``0`` for absmax);
* ``for c in range(E // L): for l in range(L): part[l] = combine(part[l], f(c * L + l))``: ``L``
  independent chains, which the C compiler and LLVM turn into vector operations;
* a pairwise fold of the partial results into ``part[0]``, ``d[i] = combine(d[i], part[0])``,
  then the last ``E % L`` elements taken in order.

Each element is still read and converted exactly once, and NaN rules are kept. A sum differs from
the one-accumulator order only by rounding, and is usually closer to the exact sum (each partial
sum adds ``E / L`` terms). A max or min is the same value; only which of two equal values is kept
may differ: ``+0.0`` or ``-0.0`` when both are the extreme, or which NaN with
``nan_propagate=True``; and with ``clear=False``, a NaN destination and a row of only NaN (NaN
ignored) give the identity instead of NaN, as packed CUDA reductions do. Loops with fewer than
``2 * L`` iterations (known when lowering), reductions over a dimension other than the source's
last one (they read with a stride: partial results made a column sum four times slower), integer
reductions (exact in any order; the compilers vectorize them already), loops that are not of the
form above, and kernels lowered with
``tl.disable_vectorize`` keep the one accumulator. GPU targets keep it too (a thread holds few
registers; its loops are short): there :func:`strip_lane_reductions` only drops the mark.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, substitute
from ..language.tileops.reduce import LANE_REDUCE, combine_rule, identity
from .loop_marks import map_marked, mark_of, without_mark

__all__ = ["lanes", "split_lane_reductions", "strip_lane_reductions"]

#: Bytes of partial results: 128 bytes are four AVX2 vectors (two AVX-512 ones), enough
#: independent chains to hide the latency of a vector operation.
_PARTIAL_BYTES = 128
_FLOATS = ("float32", "float64")


def lanes(dtype: str) -> int:
    """How many partial results a reduction in ``dtype`` keeps (:data:`_PARTIAL_BYTES` of them)."""
    return max(2, _PARTIAL_BYTES // max(1, tvm.DataType(dtype).bits // 8))


def _mark(loop: Any) -> Optional[str]:
    return mark_of(loop, LANE_REDUCE)


def _unmarked(loop: Any) -> Any:
    return without_mark(loop, LANE_REDUCE)


def _reads(expr: Any, buffer: Any) -> bool:
    return any(load.source.same_as(buffer) for load in collect(expr, tvm.ir.TensorLoad))


def _uses(exprs: Any, var: Any) -> bool:
    return any(v.same_as(var) for e in exprs for v in collect(e, tirx.Var))


def _contiguous(term: Any, r: Any) -> bool:
    """Whether every load of ``term`` that moves with ``r`` moves along its last dimension only:
    the partial results then take adjacent elements (a reduction over another dimension reads
    with a stride, where partial results cost more than they gain)."""
    moving = [load for load in collect(term, tvm.ir.TensorLoad) if _uses(list(load.indices), r)]
    return bool(moving) and all(not _uses(list(load.indices)[:-1], r) for load in moving)


def _term(value: Any, kind: str) -> Any:
    """The element term ``f(r)`` of ``combine(acc, f(r))`` as reduce.py builds it, or None."""
    if kind in ("sum", "abssum"):
        return value.b if isinstance(value, tirx.Add) else None
    return value.true_value if isinstance(value, tirx.Select) else None


def _split(loop: Any) -> Any:
    """The rewritten loop (module docstring), or the loop without its mark where it does not apply."""
    kind, _, nan = _mark(loop).partition(".")
    store = loop.body
    if not isinstance(store, tirx.BufferStore):
        return _unmarked(loop)
    buf, idx, r = store.buffer, list(store.indices), loop.loop_var
    dtype = str(buf.ty.dtype)
    if dtype not in _FLOATS or _uses(idx, r):  # 16-bit sums accumulate in float32 (reduce.py _wide_sum)
        return _unmarked(loop)
    combine = combine_rule(kind, dtype, bool(nan))
    acc = buf[tuple(idx)]
    term = _term(store.value, kind)
    if term is None or _reads(term, buf) or not tvm_ffi.structural_equal(store.value, combine(acc, term)):
        return _unmarked(loop)
    if not _contiguous(term, r):
        return _unmarked(loop)
    n = lanes(dtype)
    extent = loop.extent
    if isinstance(extent, tirx.IntImm) and extent.value < 2 * n:
        return _unmarked(loop)
    itype = str(r.ty.dtype)

    def imm(v: int) -> Any:
        return tirx.IntImm(itype, v)

    part = tirx.decl_buffer([n], dtype, name="lane_parts", scope="local")
    full = tirx.floordiv(extent, imm(n))

    def term_at(i: Any) -> Any:
        return substitute(term, [(r, loop.min + i)])

    def lane_loop(count: int, store_at: Any) -> Any:
        """``for lane in range(count): store_at(lane)`` (every loop its own variable, as TIR wants)."""
        lane = tirx.Var("lane", itype)
        return tirx.For(lane, imm(0), imm(count), tirx.ForKind.SERIAL, store_at(lane))

    start = tirx.FloatImm(dtype, -0.0) if kind in ("sum", "abssum") else identity(kind, dtype)
    chunk, rest = tirx.Var("chunk", itype), tirx.Var("rest", itype)
    stmts = [
        tirx.AllocBuffer(part),
        lane_loop(n, lambda lane: tirx.BufferStore(part, start, [lane])),
        tirx.For(chunk, imm(0), full, tirx.ForKind.SERIAL,
                 lane_loop(n, lambda lane: tirx.BufferStore(
                     part, combine(part[lane], term_at(chunk * imm(n) + lane)), [lane]))),
    ]
    width = n // 2
    while width >= 1:
        stmts.append(lane_loop(width, lambda lane, w=width: tirx.BufferStore(
            part, combine(part[lane], part[lane + imm(w)]), [lane])))
        width //= 2
    stmts.append(tirx.BufferStore(buf, combine(acc, part[0]), idx))
    stmts.append(tirx.For(rest, imm(0), extent - full * imm(n), tirx.ForKind.SERIAL,
                          tirx.BufferStore(buf, combine(acc, term_at(full * imm(n) + rest)), idx)))
    return tirx.SeqStmt(stmts)


def split_lane_reductions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every marked float reduction split into partial results (module docstring)."""
    return func if func.body is None else func.with_body(map_marked(func.body, LANE_REDUCE, _split))


def strip_lane_reductions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the marks dropped and every reduction kept as written (GPU targets, ``tl.disable_vectorize``)."""
    return func if func.body is None else func.with_body(map_marked(func.body, LANE_REDUCE))
