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
the default strides, A and B not on C's storage) into groups of :data:`ROWS` rows and 32 bytes of
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
from ..language.tileops.gemm import CPU_GEMM_TILES
from .loop_marks import map_marked, without_mark
from .markers import parallel_ndim

__all__ = ["ROWS", "strip_gemm_marks", "tile_gemms", "transpose_b_operands"]

#: Rows of C that one column loop updates together: independent chains per SIMD lane.
ROWS = 8
_TILED_DTYPES = ("float32", "float64", "int32")
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


def _transposed_b(loop: Any) -> Any:
    """The marked K loop with its B operand read from a transposed copy when B is read as
    ``B[.., j, k]`` (``transpose_B``): the copy, ``(K, N)``, made once per gemm, the nest unchanged."""
    found = _nest(loop)
    if found is None:
        return loop
    outer, inner, store = found
    k, i, j = loop.loop_var, outer.loop_var, inner.loop_var
    N, K = static_int(inner.extent), static_int(loop.extent)
    if N is None or K is None or static_int(inner.min) != 0:
        return loop
    term = store.value.b
    for load in collect(term, tvm.ir.TensorLoad):
        idx = list(load.indices)
        if (uses_var(idx[-1], k) and not uses_var(idx[-1], j) and any(uses_var(x, j) for x in idx[:-1])
                and not any(uses_var(x, i) for x in idx)):
            break
    else:
        return loop
    itype = str(j.ty.dtype)
    copy = tirx.decl_buffer([K, N], str(load.source.ty.dtype), name=f"{load.source.name}_t", scope="local")
    kk, jj = tirx.Var("bt_k", itype), tirx.Var("bt_j", itype)
    fill = _parallel([(jj, tirx.IntImm(itype, N)), (kk, tirx.IntImm(itype, K))],
                     tirx.BufferStore(copy, substitute(load, [(k, kk + loop.min), (j, jj)]), [kk, jj]))
    read = copy[k - loop.min, j]
    term = tvm_ffi.structural_map(term, [(tvm.ir.TensorLoad, lambda ld: read if ld.same_as(load) else ld)])
    body = tirx.BufferStore(store.buffer, store.value.a + term, list(store.indices))
    body = tirx.For(j, inner.min, inner.extent, inner.kind, body, inner.thread_binding, inner.annotations)
    body = tirx.For(i, outer.min, outer.extent, outer.kind, body, outer.thread_binding, outer.annotations)
    new_loop = tirx.For(k, loop.min, loop.extent, loop.kind, tirx.SeqStmt([loop.body[0], body]),
                        loop.thread_binding, loop.annotations)
    return tirx.SeqStmt([tirx.AllocBuffer(copy), *fill, new_loop])


def transpose_b_operands(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the B operand of every marked gemm K loop that reads it transposed
    (``T.gemm(..., transpose_B=True)``: ``B[j, k]``, a stride of K elements along C's rows) copied
    into a ``(K, N)`` tile first, once per gemm, and read from there: the innermost loop then
    reads it contiguously (target ``c``: 512^3 float32 in 128x128x32 tiles, 42 -> 8.7 ms; ``llvm``
    10.5 -> 6.6 ms). The nest and each element's K order are unchanged: the same bits. The
    mark stays for :func:`tile_gemms` / :func:`strip_gemm_marks`."""
    return func if func.body is None else func.with_body(map_marked(func.body, CPU_GEMM_TILES, _transposed_b))


def tile_gemms(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every marked gemm K loop run in vectorized groups of :data:`ROWS` rows of C
    (module docstring)."""
    return func if func.body is None else func.with_body(map_marked(func.body, CPU_GEMM_TILES, _tile))


def strip_gemm_marks(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the marks dropped and every gemm kept as the nest (GPU targets, target ``c``,
    ``tl.disable_vectorize``)."""
    return func if func.body is None else func.with_body(map_marked(func.body, CPU_GEMM_TILES))
