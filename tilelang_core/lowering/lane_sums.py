"""Float sums of ``T.reduce_sum``/``T.reduce_abssum`` on CPU targets: several partial sums at once.

A row sum written as one accumulator, ``for r: acc = acc + x[r]``, is a chain of dependent float
additions: each waits for the one before (3-4 cycles), and a C or LLVM compiler may not reorder
float additions, so it cannot use SIMD either. ``T.reduce_sum``/``T.reduce_abssum`` with a float
destination mark their reduction loop with :data:`~tilelang_core.language.tileops.reduce.LANE_SUM`
(the order of a reduction's additions is not part of its meaning: on GPUs the threads' partial
sums are combined as a tree). On CPU targets :func:`split_lane_sums` rewrites such a loop
``for r in range(E): d[i] = d[i] + f(r)`` into

* ``L`` partial sums (``L`` = :func:`lanes`: 32 float32, 16 float64 values), each started at
  ``-0.0`` (the identity of IEEE addition, so a sum of negative zeros stays ``-0.0``);
* ``for c in range(E // L): for l in range(L): part[l] += f(c * L + l)``: ``L`` independent
  chains, which the C compiler and LLVM turn into vector additions;
* a pairwise fold of the ``L`` partial sums into ``part[0]``, ``d[i] += part[0]``, then the last
  ``E % L`` terms added to ``d[i]`` in order.

The result differs from the one-accumulator order only by rounding, and is usually closer to the
exact sum (each partial sum adds ``E / L`` terms). Every term is still computed exactly once, in
the same type. Loops with fewer than ``2 * L`` iterations (known when lowering), sums into
integers (exact in any order; the compilers vectorize them already), loops whose term reads the
accumulator's buffer, and kernels lowered with ``tl.disable_vectorize`` keep the one accumulator.
GPU targets keep it too (a thread holds few registers; its sums are short): there
:func:`strip_lane_sums` only drops the mark.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, substitute
from ..language.tileops.reduce import LANE_SUM

__all__ = ["lanes", "split_lane_sums", "strip_lane_sums"]

#: Bytes of partial sums: 128 bytes are four AVX2 vectors (two AVX-512 ones), enough independent
#: chains to hide the latency of a vector addition.
_PARTIAL_BYTES = 128


def lanes(dtype: str) -> int:
    """How many partial sums a ``dtype`` sum keeps (:data:`_PARTIAL_BYTES` of them)."""
    return max(2, _PARTIAL_BYTES // max(1, tvm.DataType(dtype).bits // 8))


def _marked(loop: Any) -> bool:
    return isinstance(loop, tirx.For) and loop.annotations is not None and LANE_SUM in loop.annotations


def _unmarked(loop: Any) -> Any:
    notes = {k: v for k, v in loop.annotations.items() if k != LANE_SUM}
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, notes)


def _reads(expr: Any, buffer: Any) -> bool:
    return any(load.source.same_as(buffer) for load in collect(expr, tvm.ir.TensorLoad))


def _uses(exprs: Any, var: Any) -> bool:
    return any(v.same_as(var) for e in exprs for v in collect(e, tirx.Var))


def _split(loop: Any) -> Any:
    """The rewritten loop (module docstring), or the loop without its mark where it does not apply."""
    store = loop.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return _unmarked(loop)
    acc, term = store.value.a, store.value.b
    buf, idx, r = store.buffer, list(store.indices), loop.loop_var
    if (not isinstance(acc, tvm.ir.TensorLoad) or not acc.source.same_as(buf)
            or not tvm_ffi.structural_equal(list(acc.indices), idx) or _uses(idx, r) or _reads(term, buf)):
        return _unmarked(loop)
    dtype = str(buf.ty.dtype)
    if dtype not in ("float32", "float64"):  # 16-bit sums accumulate in float32 (reduce.py _wide_sum)
        return _unmarked(loop)
    n = lanes(dtype)
    extent = loop.extent
    if isinstance(extent, tirx.IntImm) and extent.value < 2 * n:
        return _unmarked(loop)
    itype = str(r.ty.dtype)

    def imm(v: int) -> Any:
        return tirx.IntImm(itype, v)

    part = tirx.decl_buffer([n], dtype, name="lane_sums", scope="local")
    full = tirx.floordiv(extent, imm(n))

    def term_at(i: Any) -> Any:
        return substitute(term, [(r, loop.min + i)])

    def lane_loop(count: int, store: Any) -> Any:
        """``for lane in range(count): store(lane)`` (every loop its own variable, as TIR wants)."""
        lane = tirx.Var("lane", itype)
        return tirx.For(lane, imm(0), imm(count), tirx.ForKind.SERIAL, store(lane))

    chunk, rest = tirx.Var("chunk", itype), tirx.Var("rest", itype)
    stmts = [
        tirx.AllocBuffer(part),
        lane_loop(n, lambda lane: tirx.BufferStore(part, tirx.FloatImm(dtype, -0.0), [lane])),
        tirx.For(chunk, imm(0), full, tirx.ForKind.SERIAL,
                 lane_loop(n, lambda lane: tirx.BufferStore(part, part[lane] + term_at(chunk * imm(n) + lane), [lane]))),
    ]
    width = n // 2
    while width >= 1:
        stmts.append(lane_loop(width, lambda lane, w=width: tirx.BufferStore(part, part[lane] + part[lane + imm(w)], [lane])))
        width //= 2
    stmts.append(tirx.BufferStore(buf, buf[tuple(idx)] + part[0], idx))
    tail = tirx.BufferStore(buf, buf[tuple(idx)] + term_at(full * imm(n) + rest), idx)
    stmts.append(tirx.For(rest, imm(0), extent - full * imm(n), tirx.ForKind.SERIAL, tail))
    return tirx.SeqStmt(stmts)


def split_lane_sums(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every marked float sum split into partial sums (module docstring)."""
    if func.body is None:
        return func
    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, lambda f: _split(f) if _marked(f) else f)]))


def strip_lane_sums(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the marks dropped and every sum kept as written (GPU targets, ``tl.disable_vectorize``)."""
    if func.body is None:
        return func
    return func.with_body(tvm_ffi.structural_map(func.body, [(tirx.For, lambda f: _unmarked(f) if _marked(f) else f)]))
