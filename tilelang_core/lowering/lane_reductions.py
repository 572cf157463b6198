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
  a value that taking nothing leaves unchanged (:func:`_lane_start`: ``-0.0`` for sums, so that a
  sum of negative zeros stays ``-0.0``; NaN for max/min/absmax that ignore NaN, whose rule
  replaces a NaN accumulator; -inf or +inf with ``nan_propagate``);
* ``for c in range(E // L): for l in range(L): part[l] = combine(part[l], f(c * L + l))``: ``L``
  independent chains, which the C compiler and LLVM turn into vector operations;
* a pairwise fold of the partial results into ``part[0]``, ``d[i] = combine(d[i], part[0])``,
  then the last ``E % L`` elements taken in order.

Each element is still read and converted exactly once, and NaN rules are kept. A sum differs from
the one-accumulator order only by rounding, and is usually closer to the exact sum (each partial
sum adds ``E / L`` terms). A max or min is the same value; only which of two equal values is kept
may differ: ``+0.0`` or ``-0.0`` when both are the extreme, or which NaN with
``nan_propagate=True``. Loops with fewer than
``2 * L`` iterations (known when lowering), integer reductions (exact in any order; the compilers
vectorize them already), loops that are not of the form above, and kernels lowered with
``tl.disable_vectorize`` keep the one accumulator. GPU targets keep it too (a thread holds few
registers; its loops are short): there :func:`strip_lane_reductions` only drops the mark.

A reduction over another dimension than the source's last one (a column sum) reads with a stride,
where partial results cost more than they gain (they made a column sum four times slower). Its
neighbouring columns are the independent chains instead: the ``T.Parallel`` nest over a
block-shared destination, ``T.Parallel(j): {acc = init; for r: acc = combine(acc, x[r, j]);
d[j] = acc}``, becomes ``T.Parallel(j): d[j] = init`` then ``for r: T.Parallel(j): d[j] =
combine(d[j], x[r, j])``, whose inner loop reads a row and vectorizes. Each column still takes its
elements in order with the same operations, so the result is the same value (a NaN may come out
with another sign or payload: a C compiler may swap the operands of an addition, which IEEE
leaves open). It applies to float32 and float64 destinations of the default strides whose rows
are at least :data:`_MIN_COLUMNS` wide (a ``T.view`` with other strides, stride 0 among them,
may give two columns one element); 16-bit sums (accumulated in float32, rounded once) and
per-thread ``local`` destinations keep their loops.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, static_int, substitute
from ..language.tileops.reduce import LANE_REDUCE, combine_rule
from .loop_marks import map_marked, mark_of, without_mark
from .markers import parallel_loops, parallel_ndim

__all__ = ["SIMD_LANES", "lanes", "split_lane_reductions", "strip_lane_reductions"]

#: Loop annotation on the lane loops of a split reduction (each lane touches only its own partial
#: result; a fold loop writes ``[0, w)`` from ``[w, 2w)``): target ``c`` puts ``#pragma omp simd``
#: before them, where GCC otherwise unrolled the fold loops into scalar selects (a float32 row
#: maximum of 2048 x 2048: 9.4 ms, 3.1 ms with the pragmas); every other path drops the mark
#: (lowering/frontend.py).
SIMD_LANES = "tl.simd_lanes"

#: Bytes of partial results: 128 bytes are four AVX2 vectors (two AVX-512 ones), enough
#: independent chains to hide the latency of a vector operation.
_PARTIAL_BYTES = 128
_FLOATS = ("float32", "float64")
#: A column reduction is interchanged only where its ``T.Parallel`` rows are at least this wide
#: (a narrower one gains no vector and keeps its register accumulator).
_MIN_COLUMNS = 2


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


def _lane_start(kind: str, dtype: str, nan_propagate: bool) -> Any:
    """The value a partial result starts at: one that taking no element leaves unchanged in the end.

    ``-0.0`` for sums (the identity of IEEE addition). NaN for max/min/absmax that ignore NaN:
    their rule replaces a NaN accumulator by the next element, so a lane that took no number
    stays NaN and the fold and the destination skip it (a NaN destination stays NaN, as in the
    one-accumulator order). With ``nan_propagate`` a NaN is kept, so those start at -inf (max,
    absmax) or +inf (min); absmax's own identity 0 would replace a negative ``clear=False``
    destination.
    """
    if kind in ("sum", "abssum"):
        return tirx.FloatImm(dtype, -0.0)
    if not nan_propagate:
        return tirx.FloatImm(dtype, float("nan"))
    return tirx.FloatImm(dtype, float("inf") if kind == "min" else float("-inf"))


def _update(loop: Any) -> Optional[tuple]:
    """``(store, kind, nan_propagate, combine, term)`` of a marked float reduction loop
    ``for r: acc = combine(acc, term(r))`` (``acc`` one element, ``term`` not reading its buffer),
    else None."""
    mark = _mark(loop)
    store = loop.body
    if mark is None or not isinstance(store, tirx.BufferStore):
        return None
    kind, _, nan = mark.partition(".")
    buf, idx = store.buffer, list(store.indices)
    dtype = str(buf.ty.dtype)
    if dtype not in _FLOATS or _uses(idx, loop.loop_var):  # 16-bit sums accumulate in float32 (reduce.py _wide_sum)
        return None
    combine = combine_rule(kind, dtype, bool(nan))
    term = _term(store.value, kind)
    if term is None or _reads(term, buf) or not tvm_ffi.structural_equal(store.value, combine(buf[tuple(idx)], term)):
        return None
    return store, kind, bool(nan), combine, term


def _split(loop: Any) -> Any:
    """The rewritten loop (module docstring), or the loop without its mark where it does not apply."""
    found = _update(loop)
    r = loop.loop_var
    if found is None or not _contiguous(found[4], r):
        return _unmarked(loop)
    store, kind, nan, combine, term = found
    buf, idx = store.buffer, list(store.indices)
    dtype = str(buf.ty.dtype)
    acc = buf[tuple(idx)]
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
        """``for lane in range(count): store_at(lane)`` (every loop its own variable, as TIR wants),
        marked :data:`SIMD_LANES`: its lanes are independent."""
        lane = tirx.Var("lane", itype)
        return tirx.For(lane, imm(0), imm(count), tirx.ForKind.SERIAL, store_at(lane), annotations={SIMD_LANES: 1})

    start = _lane_start(kind, dtype, nan)
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


def _one_element_each(indices: list, loops: list) -> bool:
    """Whether ``indices`` (into a buffer of the default, compact strides) give every iteration of
    ``loops`` its own element: each index is a loop variable, or a loop variable plus an offset
    free of them, and each variable is used once."""
    loop_vars = [loop.loop_var for loop in loops]
    used = []
    for index in indices:
        here = [v for v in loop_vars if _uses([index], v)]
        if not here:
            continue
        var = here[0]
        plain = index.same_as(var) or (isinstance(index, tirx.Add) and (
            (index.b.same_as(var) and not any(_uses([index.a], v) for v in loop_vars))
            or (index.a.same_as(var) and not any(_uses([index.b], v) for v in loop_vars))))
        if len(here) > 1 or not plain:
            return False
        used.append(var)
    return len(used) == len(loop_vars) and all(not a.same_as(b) for i, a in enumerate(used) for b in used[i + 1:])


def _column_update(red: Any, slot: Any) -> Optional[tuple]:
    """``(combine, term)`` of a marked float reduction loop ``for r: slot[0] = combine(slot[0], term(r))``
    whose loads move along another dimension than their last, else None."""
    found = _update(red)
    if found is None or not found[0].buffer.same_as(slot):
        return None
    _, _, _, combine, term = found
    if not _uses([term], red.loop_var) or _contiguous(term, red.loop_var):
        return None
    return combine, term


def _interchanged(marker: Any, loops: list, red: Any, init: Any, dst: Any, didx: list, combine: Any,
                  term: Any) -> list:
    """``T.Parallel(loops): dst = init`` (unless ``init`` is None), then
    ``for r: T.Parallel(loops): dst = combine(dst, term(r))``, every loop with its own variable."""

    def parallel(store_at: Any) -> list:
        fresh = [tirx.Var(loop.loop_var.name, str(loop.loop_var.ty.dtype)) for loop in loops]
        mapping = [(loop.loop_var, v) for loop, v in zip(loops, fresh)]
        body = store_at(mapping)
        for loop, v in reversed(list(zip(loops, fresh))):
            body = tirx.For(v, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations)
        return [marker, body]

    def element(mapping: list) -> list:
        return [substitute(i, mapping) for i in didx]

    out = []
    if init is not None:
        out += parallel(lambda m: tirx.BufferStore(dst, substitute(init, m), element(m)))
    r = tirx.Var(red.loop_var.name, str(red.loop_var.ty.dtype))
    update = parallel(lambda m: tirx.BufferStore(
        dst, combine(dst[tuple(element(m))], substitute(term, m + [(red.loop_var, r)])), element(m)))
    out.append(tirx.For(r, red.min, red.extent, tirx.ForKind.SERIAL, tirx.SeqStmt(update)))
    return out


def _column_reduction(marker: Any, nest: Any) -> Optional[list]:
    """The interchanged form (:func:`_interchanged`) of a ``T.Parallel`` marker and its loop nest
    when the nest is a column reduction of reduce.py's block-shared form, else None:
    ``T.Parallel(i): {slot = init; for r: slot = combine(slot, term(i, r)); dst[i] = slot}``."""
    ndim = parallel_ndim(marker)
    loops = parallel_loops(nest, ndim) if ndim and isinstance(nest, tirx.For) else []
    body = loops[-1].body if loops and len(loops) == ndim else None
    if not (isinstance(body, tirx.SeqStmt) and len(body) == 4):
        return None
    alloc, init, red, store = body[0], body[1], body[2], body[3]
    if not (isinstance(alloc, tirx.AllocBuffer) and isinstance(init, tirx.BufferStore) and isinstance(red, tirx.For)
            and isinstance(store, tirx.BufferStore)):
        return None
    slot, dst, didx = alloc.buffer, store.buffer, list(store.indices)
    found = _column_update(red, slot)
    if (found is None or not init.buffer.same_as(slot) or _reads(init.value, slot) or str(dst.ty.dtype) != str(slot.ty.dtype)
            or not (isinstance(store.value, tvm.ir.TensorLoad) and store.value.source.same_as(slot))
            or _reads(found[1], dst) or len(dst.strides) or not _one_element_each(didx, loops)):
        return None
    width = static_int(loops[-1].extent)
    if width is not None and width < _MIN_COLUMNS:
        return None
    combine, term = found
    # clear=False starts the slot from the destination, which already holds it
    keeps = isinstance(init.value, tvm.ir.TensorLoad) and tvm_ffi.structural_equal(init.value, dst[tuple(didx)])
    return _interchanged(marker, loops, red, None if keeps else init.value, dst, didx, combine, term)


def _interchange_columns(seq: Any) -> Any:
    """``seq`` (a ``SeqStmt``) with each column reduction interchanged (:func:`_column_reduction`)."""
    stmts, out, changed, i = list(seq), [], False, 0
    while i < len(stmts):
        swapped = _column_reduction(stmts[i], stmts[i + 1]) if i + 1 < len(stmts) else None
        if swapped is None:
            out.append(stmts[i])
            i += 1
        else:
            out += swapped
            i, changed = i + 2, True
    return tirx.SeqStmt(out) if changed else seq


def split_lane_reductions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every marked float reduction split into partial results, or interchanged with
    its ``T.Parallel`` nest where it runs over another dimension than the last (module docstring)."""
    if func.body is None:
        return func
    body = tvm_ffi.structural_map(func.body, [(tirx.SeqStmt, _interchange_columns)])
    return func.with_body(map_marked(body, LANE_REDUCE, _split))


def strip_lane_reductions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the marks dropped and every reduction kept as written (GPU targets, ``tl.disable_vectorize``)."""
    return func if func.body is None else func.with_body(map_marked(func.body, LANE_REDUCE))
