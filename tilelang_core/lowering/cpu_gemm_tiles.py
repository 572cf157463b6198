"""``T.gemm`` on target ``llvm``: rows of C accumulated in vector registers.

``T.gemm`` into a shared or fragment ``C`` is a K loop around a ``T.Parallel`` nest over C (on
GPUs each thread updates the elements it owns)::

    for k in range(K):
        for i, j in T.Parallel(M, N):
            C[i, j] = C[i, j] + A[i, k] * B[k, j]

On a CPU that nest is a loop over C's rows around a SIMD loop along them: every vector of
multiply-adds loads C's vector and stores it back, so the loads and stores, not the arithmetic,
set the pace. On target ``llvm`` :func:`tile_gemms` rewrites the K loop of a gemm that ``T.gemm``
marked with :data:`~tilelang_core.language.tileops.gemm.CPU_GEMM_TILES` (C of static shape and
the default strides; A and B are never on C's storage, ``T.gemm`` refuses that) into groups of :data:`ROWS` rows and 32 bytes of
columns of C::

    for tile_i in range(M // ROWS):
        for tile_g in range(N // W):
            for v in T.vectorized(W):                       (W columns: 32 bytes)
                c_rows[r] = C[tile_i * ROWS + r, tile_g * W + v]          (r = 0 .. ROWS-1)
                for k in range(K):
                    c_rows[r] = c_rows[r] + A[tile_i * ROWS + r, k] * B[k, tile_g * W + v]
                C[tile_i * ROWS + r, tile_g * W + v] = c_rows[r]

TVM's vectorizer turns the ``ROWS`` accumulators into vector registers that live through the
whole K loop: ``ROWS`` independent multiply-add chains, and C is read and written once. Rows left
over when ``M`` is not a multiple of ``ROWS`` run the K loop over the nest as before; so does a
gemm whose ``N`` is not a multiple of ``W``.

Each element of C still takes ``A[i, k] * B[k, j]`` for ``k = 0, 1, ...`` in order, with the same
operations, so the results are the same bits as before. Accumulators other than float32,
float64 and int32 keep the nest. GPU targets, target ``c`` and every target with
``tl.disable_vectorize`` keep it too: there :func:`strip_gemm_marks` only drops the mark.

Target ``c`` would need the same form written for the C compiler: a ``#pragma omp simd`` loop over
the columns around the K loop. GCC 12.2 vectorized that loop wrongly (a gemm with N = 3, K = 2 and
a transposed B gave other sums at -O2 and -O3, right ones with -fno-tree-loop-vectorize), so the
C source keeps the nest. A form with the SIMD loops innermost (one array per row of the group,
updated inside the K loop) is right but gained only a tenth: GCC kept those arrays in memory,
not in registers, where the tiles are the kernel's own stack arrays.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.core import PARALLEL_MARKER
from ..language.tileops._common import collect, static_int, substitute, uses_var
from ..language.tileops.gemm import CPU_GEMM_TILES, CPU_LOCAL_GEMM
from .loop_marks import map_marked, without_mark
from .markers import parallel_ndim

__all__ = ["ROWS", "copy_gemm_operands", "strip_gemm_marks", "tile_gemms"]

#: Rows of C that one column loop updates together: independent chains per SIMD lane.
ROWS = 8
_TILED_DTYPES = ("float32", "float64", "int32")
_WIDE_FLOATS = ("float32", "float64")
_VECTOR_BYTES = 32


def _unmarked(loop: Any) -> Any:
    return without_mark(loop, CPU_GEMM_TILES)


def _nest(loop: Any) -> Optional[tuple]:
    """``(i loop, j loop, store)`` of the marked K loop's ``T.Parallel(M, N)`` nest, else None."""
    body = loop.body
    if not isinstance(body, tirx.SeqStmt) or len(body) != 2 or parallel_ndim(body[0]) != 2:
        return None
    outer = body[1]
    inner = outer.body if isinstance(outer, tirx.For) else None
    store = inner.body if isinstance(inner, tirx.For) else None
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return None
    acc = store.value.a
    if not (isinstance(acc, tvm.ir.TensorLoad) and acc.source.same_as(store.buffer)
            and tvm_ffi.structural_equal(list(acc.indices), list(store.indices))):
        return None
    if any(load.source.same_as(store.buffer) for load in collect(store.value.b, tvm.ir.TensorLoad)):
        return None
    return outer, inner, store


def _parallel(loops: list, body: Any) -> Any:
    """``T.Parallel`` over ``loops`` (``[(var, extent)]``) around ``body``: the marker and the nest."""
    for var, extent in reversed(loops):
        body = tirx.For(var, tirx.IntImm(var.ty.dtype, 0), extent, tirx.ForKind.SERIAL, body)
    marker = tirx.Evaluate(tirx.call_extern("int32", PARALLEL_MARKER, len(loops)))
    return tirx.SeqStmt([marker, body])


def _tile(loop: Any) -> Any:
    """The rewritten K loop (module docstring), or the loop without its mark where it does not apply."""
    found = _nest(loop)
    if found is None:
        return _unmarked(loop)
    outer, inner, store = found
    M, N = static_int(outer.extent), static_int(inner.extent)
    dtype = str(store.buffer.ty.dtype)
    if (M is None or N is None or dtype not in _TILED_DTYPES or static_int(outer.min) != 0
            or static_int(inner.min) != 0 or len(store.buffer.strides)):
        return _unmarked(loop)  # C a T.view of other strides (0 among them): two elements may be one
    row_tiles = M // ROWS
    if row_tiles == 0:
        return _unmarked(loop)
    k, i, j = loop.loop_var, outer.loop_var, inner.loop_var
    itype = str(i.ty.dtype)

    def imm(v: int) -> Any:
        return tirx.IntImm(itype, v)

    def k_loop(body: Any) -> Any:
        kv = tirx.Var(k.name, str(k.ty.dtype))
        return tirx.For(kv, loop.min, loop.extent, tirx.ForKind.SERIAL, substitute(body, [(k, kv)]))

    # TVM vectorizes each group of columns (the accumulators become vectors); 32 bytes a group, so
    # that the ROWS accumulators fit AVX2's 16 vector registers (64 bytes spilled: 3x slower)
    width = _VECTOR_BYTES // (tvm.DataType(dtype).bits // 8)
    if N % width:
        return _unmarked(loop)
    tile_i, group, lane = tirx.Var("tile_i", itype), tirx.Var("tile_g", itype), tirx.Var("tile_v", itype)
    acc = tirx.decl_buffer([ROWS], dtype, name="c_rows", scope="local")
    c_load, term = store.value.a, store.value.b

    def at(r: int, expr: Any) -> Any:
        return substitute(expr, [(i, tile_i * imm(ROWS) + imm(r)), (j, group * imm(width) + lane)])

    column = tirx.SeqStmt([
        tirx.AllocBuffer(acc),
        *[tirx.BufferStore(acc, at(r, c_load), [imm(r)]) for r in range(ROWS)],
        k_loop(tirx.SeqStmt([tirx.BufferStore(acc, acc[imm(r)] + at(r, term), [imm(r)]) for r in range(ROWS)])),
        *[tirx.BufferStore(store.buffer, acc[imm(r)], list(at(r, c_load).indices)) for r in range(ROWS)],
    ])
    columns = tirx.For(group, imm(0), imm(N // width), tirx.ForKind.SERIAL,
                       tirx.For(lane, imm(0), imm(width), tirx.ForKind.VECTORIZED, column))
    stmts = [tirx.For(tile_i, imm(0), imm(row_tiles), tirx.ForKind.SERIAL, columns)]
    if M % ROWS:  # the last rows: the K loop over the nest, as before
        iv, jv = tirx.Var(i.name, itype), tirx.Var(j.name, itype)
        shifted = substitute(store, [(i, iv + imm(row_tiles * ROWS)), (j, jv)])
        stmts.append(k_loop(_parallel([(iv, imm(M % ROWS)), (jv, imm(N))], shifted)))
    return tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]


def _operand(term: Any, along: Any, across: Any) -> Optional[tuple]:
    """``(load, cast)`` for the operand of a gemm ``term`` that varies with the loop variable
    ``along`` and not with ``across`` (B: along C's rows ``j``, across ``i``; A: the other way);
    ``cast`` the widening of a float16 load to float32 or float64 around it, else None. None when
    no load has that form."""
    for load in collect(term, tvm.ir.TensorLoad):
        idx = list(load.indices)
        if any(uses_var(x, across) for x in idx) or not any(uses_var(x, along) for x in idx):
            continue
        widened = [c for c in collect(term, tirx.Cast) if c.value.same_as(load)
                   and str(load.source.ty.dtype) == "float16" and str(c.ty.dtype) in _WIDE_FLOATS]
        return load, (widened[0] if widened else None)
    return None


def _b_copied(loop: Any, widen_float16: bool) -> Any:
    """The marked K loop with its B operand read from a ``(K, N)`` copy made once per gemm, where
    B is read as ``B[.., j, k]`` (``transpose_B``) or, with ``widen_float16``, where it is a float16
    tile widened to float (the copy holds the widened values); the nest otherwise unchanged."""
    found = _nest(loop)
    if found is None:
        return loop
    outer, inner, store = found
    k, i, j = loop.loop_var, outer.loop_var, inner.loop_var
    N, K = static_int(inner.extent), static_int(loop.extent)
    operand = _operand(store.value.b, j, i) if N is not None and K is not None and static_int(inner.min) == 0 else None
    if operand is None:
        return loop
    load, cast = operand
    last = list(load.indices)[-1]
    transposed = uses_var(last, k) and not uses_var(last, j)  # read as B[.., j, k]
    if not widen_float16:
        cast = None
    if not transposed and cast is None:
        return loop
    itype = str(j.ty.dtype)
    replaced = load if cast is None else cast
    copy = tirx.decl_buffer([K, N], str(replaced.ty.dtype), name=f"{load.source.name}_t", scope="local")
    kk, jj = tirx.Var("bt_k", itype), tirx.Var("bt_j", itype)
    value = substitute(replaced, [(k, kk + loop.min), (j, jj)])
    order = [(jj, tirx.IntImm(itype, N)), (kk, tirx.IntImm(itype, K))]  # B's rows are j: read along k
    fill = _parallel(order if transposed else order[::-1], tirx.BufferStore(copy, value, [kk, jj]))
    read = copy[k - loop.min, j]
    term = tvm_ffi.structural_map(store.value.b, [(type(replaced), lambda n: read if n.same_as(replaced) else n)])
    body = tirx.BufferStore(store.buffer, store.value.a + term, list(store.indices))
    body = tirx.For(j, inner.min, inner.extent, inner.kind, body, inner.thread_binding, inner.annotations)
    body = tirx.For(i, outer.min, outer.extent, outer.kind, body, outer.thread_binding, outer.annotations)
    new_loop = tirx.For(k, loop.min, loop.extent, loop.kind, tirx.SeqStmt([loop.body[0], body]),
                        loop.thread_binding, loop.annotations)
    return tirx.SeqStmt([tirx.AllocBuffer(copy), *fill, new_loop])


def _local_operands_widened(loop: Any) -> Any:
    """The marked row loop of a per-thread gemm (``for i: for k: for j: C[i, j] += A * B``) with
    each float16 operand read from a copy of its widened values, ``(M, K)`` for A and ``(K, N)``
    for B, made once before it; the loop without its mark where the nest is not of that form or
    neither operand is float16."""
    unmarked = without_mark(loop, CPU_LOCAL_GEMM)
    k_loop = loop.body
    j_loop = k_loop.body if isinstance(k_loop, tirx.For) else None
    store = j_loop.body if isinstance(j_loop, tirx.For) else None
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tirx.Add):
        return unmarked
    loops = (loop, k_loop, j_loop)
    extents = [static_int(x.extent) for x in loops]
    if None in extents or any(static_int(x.min) != 0 for x in loops):
        return unmarked
    (i, k, j), (M, K, N) = [x.loop_var for x in loops], extents
    itype = str(j.ty.dtype)
    term, stmts, reads = store.value.b, [], {}
    for outer, inner, rows, cols in ((i, j, (i, M), (k, K)), (j, i, (k, K), (j, N))):  # A, then B
        found = _operand(term, outer, inner)
        if found is None or found[1] is None:
            continue
        load, cast = found
        copy = tirx.decl_buffer([rows[1], cols[1]], str(cast.ty.dtype), name=f"{load.source.name}_w", scope="local")
        r, c = tirx.Var("w_r", itype), tirx.Var("w_c", itype)
        fill = tirx.BufferStore(copy, substitute(cast, [(rows[0], r), (cols[0], c)]), [r, c])
        fill = tirx.For(c, tirx.IntImm(itype, 0), tirx.IntImm(itype, cols[1]), tirx.ForKind.SERIAL, fill)
        stmts += [tirx.AllocBuffer(copy), tirx.For(r, tirx.IntImm(itype, 0), tirx.IntImm(itype, rows[1]),
                                                  tirx.ForKind.SERIAL, fill)]
        reads[cast] = copy[rows[0], cols[0]]
    if not reads:
        return unmarked
    term = tvm_ffi.structural_map(term, [(tirx.Cast, lambda n: next((v for c, v in reads.items() if n.same_as(c)), n))])
    body = tirx.BufferStore(store.buffer, store.value.a + term, list(store.indices))
    body = tirx.For(j, j_loop.min, j_loop.extent, j_loop.kind, body, j_loop.thread_binding, j_loop.annotations)
    body = tirx.For(k, k_loop.min, k_loop.extent, k_loop.kind, body, k_loop.thread_binding, k_loop.annotations)
    return tirx.SeqStmt([*stmts, without_mark(loop, CPU_LOCAL_GEMM, body)])


def copy_gemm_operands(func: tirx.PrimFunc, widen_float16: bool = False) -> tirx.PrimFunc:
    """``func`` with gemm operands copied once per gemm and read from the copies, where that makes
    the innermost loop (along C's rows) vectorizable. The B operand of a marked K loop (a shared
    or fragment C) goes into a ``(K, N)`` tile:

    - B read transposed (``T.gemm(..., transpose_B=True)``: ``B[j, k]``, a stride of K elements
      along C's rows): the copy reads it contiguously (target ``c``: 512^3 float32 in 128x128x32
      tiles, 42 -> 8.7 ms; ``llvm`` 10.5 -> 6.6 ms);
    - with ``widen_float16`` (target ``c``), a float16 B widened to float32 or float64: the copy
      holds the widened values. GCC 12 converts ``_Float16`` one element at a time (no vector
      conversion without AVX512-FP16), so the nest ran scalar: 512^3 float16 into float32 in
      64x64x32 tiles, 291 -> 8-12 ms on cython/c. A float16 value widens exactly. A per-thread
      gemm (mark ``CPU_LOCAL_GEMM``) has each float16 operand widened into a copy the same way
      (:func:`_local_operands_widened`; 73 -> 15 ms); without ``widen_float16`` its mark is dropped.
      There the loop, now vectorized, may see its add's operands swapped by GCC: x86 keeps the first
      operand's NaN, so a NaN result's sign bit may differ (IEEE 754 leaves it open).

    The nest and each element's K order and operations are unchanged: the same bits. The mark
    stays for :func:`tile_gemms` / :func:`strip_gemm_marks`."""
    if func.body is None:
        return func
    body = map_marked(func.body, CPU_GEMM_TILES, lambda loop: _b_copied(loop, widen_float16))
    return func.with_body(map_marked(body, CPU_LOCAL_GEMM, _local_operands_widened if widen_float16 else None))


def tile_gemms(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every marked gemm K loop run in vectorized groups of :data:`ROWS` rows of C
    (module docstring)."""
    return func if func.body is None else func.with_body(map_marked(func.body, CPU_GEMM_TILES, _tile))


def strip_gemm_marks(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the marks dropped and every gemm kept as the nest (GPU targets, target ``c``,
    ``tl.disable_vectorize``)."""
    return func if func.body is None else func.with_body(map_marked(map_marked(func.body, CPU_GEMM_TILES), CPU_LOCAL_GEMM))
