"""Kernels of the tile-operator tests (issue 7), shared by the CPU and the CUDA test files.

``style="cpu"`` writes kernels the way TileLang's CPU tests do (per-thread ``T.alloc_local`` tiles,
one thread per block); ``style="gpu"`` uses shared tiles and fragment accumulators with 128
threads per block. Both styles run on CPU targets; the GPU style is what the CUDA tests compile.
Not a test module itself (no ``test_`` prefix): test files load it by path.
"""

from __future__ import annotations

import tilelang.language as T


def _tile(style, shape, dtype, shared=True):
    if style == "cpu":
        return T.alloc_local(shape, dtype)
    return T.alloc_shared(shape, dtype) if shared else T.alloc_fragment(shape, dtype)


def _threads(style):
    return 1 if style == "cpu" else 128


def matmul(M, N, K, bm, bn, bk, dtype="float16", accum="float32", trans_A=False, trans_B=False, style="cpu"):
    """``C = op(A) @ op(B)`` blocked over (bm, bn) with a K loop of step bk."""
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    a_tile = (bk, bm) if trans_A else (bm, bk)
    b_tile = (bn, bk) if trans_B else (bk, bn)
    threads = _threads(style)

    @T.prim_func
    def matmul_kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_t = _tile(style, a_tile, dtype)
            B_t = _tile(style, b_tile, dtype)
            C_t = _tile(style, (bm, bn), accum, shared=False)
            T.clear(C_t)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                if trans_A:
                    T.copy(A[ko * bk, by * bm], A_t)
                else:
                    T.copy(A[by * bm, ko * bk], A_t)
                if trans_B:
                    T.copy(B[bx * bn, ko * bk], B_t)
                else:
                    T.copy(B[ko * bk, bx * bn], B_t)
                T.gemm(A_t, B_t, C_t, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_t, C[by * bm, bx * bn])

    return matmul_kernel


def copy_edges(M, N, bm, bn, style="cpu"):
    """Tiles that overhang both matrices: ``P`` (padded to whole tiles) and ``O`` (exact shape).

    ``P`` gets A where A exists and 0 in the padding (reads outside A are not done, the tile gets
    0); ``O`` is written through a region that overhangs it (writes outside O are not done).
    """
    Mp = -(-M // bm) * bm
    Np = -(-N // bn) * bn
    threads = _threads(style)

    @T.prim_func
    def copy_kernel(A: T.Tensor((M, N), "float32"), P: T.Tensor((Mp, Np), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            S = _tile(style, (bm, bn), "float32")
            F = _tile(style, (bm, bn), "float32", shared=False)
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, P[by * bm, bx * bn])
            T.copy(A[by * bm : (by + 1) * bm, bx * bn : (bx + 1) * bn], F)
            for i, j in T.Parallel(bm, bn):
                F[i, j] = F[i, j] * 2.0
            T.copy(F, O[by * bm : (by + 1) * bm, bx * bn : (bx + 1) * bn])

    return copy_kernel


def copy_dynamic(bm, bn, style="cpu"):
    """Copy of a matrix with dynamic rows through fragment tiles (guards on symbolic bounds)."""
    M = T.dynamic("m")
    N = 48
    threads = _threads(style)

    @T.prim_func
    def copy_dyn(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            F = _tile(style, (bm, bn), "float32", shared=False)
            T.copy(A[by * bm, bx * bn], F)
            T.copy(F, B[by * bm, bx * bn])

    return copy_dyn


REDUCERS = ("sum", "max", "min", "abssum", "absmax")


def reduce_both(M, N, op, style="cpu"):
    """``R0 = reduce_op(A, dim=0)``, ``R1 = reduce_op(A, dim=1)`` and ``R2`` = twice the dim-1
    result through ``clear=False`` accumulation (for sum-like ops)."""
    threads = _threads(style)
    fn = getattr(T, f"reduce_{op}")

    @T.prim_func
    def reduce_kernel(
        A: T.Tensor((M, N), "float32"),
        R0: T.Tensor((N,), "float32"),
        R1: T.Tensor((M,), "float32"),
        R2: T.Tensor((M,), "float32"),
    ):
        with T.Kernel(1, threads=threads) as _:
            S = _tile(style, (M, N), "float32", shared=False)
            D0 = _tile(style, (N,), "float32", shared=False)
            D1 = _tile(style, (M,), "float32", shared=False)
            T.copy(A, S)
            fn(S, D0, dim=0)
            fn(S, D1, dim=1)
            T.copy(D0, R0)
            T.copy(D1, R1)
            fn(S, D1, dim=-1, clear=False)
            T.copy(D1, R2)

    return reduce_kernel


def atomic_sum(n, bs, style="cpu"):
    """``C[0] = sum(A)`` by element atomics from every block; ``D += A`` chunks by region atomics."""
    threads = _threads(style)

    @T.prim_func
    def atomic_kernel(A: T.Tensor((n,), "float32"), C: T.Tensor((1,), "float32"), D: T.Tensor((bs,), "float32")):
        with T.Kernel(T.ceildiv(n, bs), threads=threads) as bx:
            for i in T.Parallel(bs):
                if bx * bs + i < n:
                    T.atomic_add(C[0], A[bx * bs + i])
            T.atomic_add(D[0:bs], A[bx * bs : bx * bs + bs])

    return atomic_kernel


def softmax(M, N, bm, style="cpu"):
    """Row softmax: reduce_max, exp, reduce_sum on a (bm, N) tile per block."""
    threads = _threads(style)

    @T.prim_func
    def softmax_kernel(A: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            S = _tile(style, (bm, N), "float32", shared=False)
            mx = _tile(style, (bm,), "float32", shared=False)
            sm = _tile(style, (bm,), "float32", shared=False)
            T.copy(A[bx * bm, 0], S)
            T.reduce_max(S, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                S[i, j] = T.exp(S[i, j] - mx[i])
            T.reduce_sum(S, sm, dim=1)
            for i, j in T.Parallel(bm, N):
                S[i, j] = S[i, j] / sm[i]
            T.copy(S, O[bx * bm, 0])

    return softmax_kernel


def fill_kernel(M, N, style="cpu"):
    """``F = 3.5`` everywhere via T.fill on a fragment, then a T.clear of a sub-region."""
    threads = _threads(style)

    @T.prim_func
    def fill_k(O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as _:
            F = _tile(style, (M, N), "float32", shared=False)
            T.fill(F, 3.5)
            T.copy(F, O)
            T.clear(O[0:2, 0:N])

    return fill_k


def copy_corners(B, M, N, style="cpu"):
    """Corners on a 3-D tensor into 2-D tiles, and a column tile ``(16, 1)``: ``O = X`` and
    ``Col[:, 0] = X[b, :, 3]``."""
    threads = _threads(style)

    @T.prim_func
    def corners(X: T.Tensor((B, M, N), "float32"), O: T.Tensor((B, M, N), "float32"), Col: T.Tensor((B, M, 1), "float32")):
        with T.Kernel(T.ceildiv(M, 16), B, threads=threads) as (bx, b):
            S = _tile(style, (16, N), "float32")
            C = _tile(style, (16, 1), "float32", shared=False)
            T.copy(X[b, bx * 16, 0], S)
            T.copy(S, O[b, bx * 16, 0])
            T.copy(X[b, bx * 16, 3], C)
            T.copy(C, Col[b, bx * 16, 0])

    return corners


def gemm_regions(M, N, K, style="cpu"):
    """``C = A @ B`` as two gemms over K halves given as regions; the first clears the accumulator
    (which was filled with garbage first)."""
    threads = _threads(style)
    h = K // 2

    @T.prim_func
    def gemm_reg(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as _:
            A_s = _tile(style, (M, K), "float32")
            B_s = _tile(style, (K, N), "float32")
            C_f = _tile(style, (M, N), "float32", shared=False)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.fill(C_f, 5.0)
            T.gemm(A_s[0:M, 0:h], B_s[0:h, 0:N], C_f, clear_accum=True)
            T.gemm(A_s[0:M, h:K], B_s[h:K, 0:N], C_f)
            T.copy(C_f, C)

    return gemm_reg


def atomic_count(blocks, per_block, dtype="int32", step=1):
    """Every block adds ``step`` into ``C[0]`` ``per_block`` times (element atomics, one cell)."""

    @T.prim_func
    def atomic_count_kernel(C: T.Tensor((1,), dtype)):
        with T.Kernel(blocks, threads=128) as bx:  # noqa: F841 - bx unused: every block, one cell
            for i in T.Parallel(per_block):
                T.atomic_add(C[0], step)

    return atomic_count_kernel


def running_max(M, N, bm, style="cpu"):
    """Row maxima from a running maximum that starts at ``-T.infinity`` (TileLang's pattern)."""
    threads = _threads(style)

    @T.prim_func
    def running_max_kernel(A: T.Tensor((M, N), "float32"), O: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            m = T.alloc_fragment((bm,), "float32")
            T.fill(m, -T.infinity("float32"))
            for j in T.serial(N):
                for i in T.Parallel(bm):
                    if bx * bm + i < M:
                        m[i] = T.max(m[i], A[bx * bm + i, j])
            T.copy(m, O[bx * bm])

    return running_max_kernel
