"""Kernels over raw addresses (``T.ptr`` parameters, pointer tables, ``T.make_tensor``), shared by
tests/test_compat_pointers.py (CPU paths) and tests/test_compat_pointers_cuda.py (CUDA source)."""

from __future__ import annotations

import tilelang.language as T


def scaled_copy(block=4, grid=None):
    """``B = A * 2`` for ``(m, n)`` float32 tensors given as pointers, ``m`` and ``n`` run-time
    scalars; rows past ``m`` are guarded. ``grid``: a static block count (default ``ceil(m / block)``)."""

    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, m: T.int32, n: T.int32):
        A = T.make_tensor(a_ptr, (m, n), T.float32)
        B = T.make_tensor(b_ptr, (m, n), T.float32)
        with T.Kernel(T.ceildiv(m, block) if grid is None else grid, threads=32) as bx:
            for i, j in T.Parallel(block, n):
                if bx * block + i < m:
                    B[bx * block + i, j] = A[bx * block + i, j] * 2

    return main


def table_copy(G, N, dtype="float16"):
    """Two reads through a table of ``G`` addresses: ``first`` = the tensor at ``table[0]`` (made
    before ``T.Kernel``, a static index), ``out[g]`` = the tensor at ``table[g]`` (made inside,
    indexed by the block)."""

    @T.prim_func
    def main(table: T.Tensor([G], T.ptr), out: T.Tensor([G, N], dtype), first: T.Tensor([N], dtype)):
        First = T.make_tensor(table[0], (N,), dtype)
        with T.Kernel(G, threads=1) as bx:
            Src = T.make_tensor(table[bx], (N,), dtype)
            for i in T.serial(N):
                out[bx, i] = Src[i]
                if bx == 0:
                    first[i] = First[i]

    return main


def grouped_gemm(sizes, N, K, block_M=8, block_N=8, block_K=8, dtype="float32"):
    """``C_g = A_g @ B_g`` for groups of ``sizes[g]`` rows, every operand found through a table of
    addresses. Each block finds its group at run time from ``tile_offsets`` (its first M tile),
    as TileLang's grouped GEMM example does; ``A_g``/``C_g`` are declared with the group's
    run-time row count ``rows[g]``, so edge tiles are guarded."""
    G = len(sizes)
    m_tiles = sum(-(-s // block_M) for s in sizes)

    @T.prim_func
    def main(
        a_ptrs: T.Tensor([G], T.ptr),
        b_ptrs: T.Tensor([G], T.ptr),
        c_ptrs: T.Tensor([G], T.ptr),
        tile_offsets: T.Tensor([G], T.int32),
        rows: T.Tensor([G], T.int32),
    ):
        with T.Kernel(m_tiles, T.ceildiv(N, block_N), threads=32) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), dtype)
            g = T.alloc_var(T.int32)
            first = T.alloc_var(T.int32)
            g = 0
            first = 0
            for i in T.serial(G):
                if bx >= tile_offsets[i]:
                    g = i
                    first = tile_offsets[i]
            A = T.make_tensor(a_ptrs[g], (rows[g], K), dtype)
            B = T.make_tensor(b_ptrs[g], (K, N), dtype)
            C = T.make_tensor(c_ptrs[g], (rows[g], N), dtype)
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[(bx - first) * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, by * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[(bx - first) * block_M, by * block_N])

    return main


def grouped_gemm_operands(sizes, N, K, block_M=8):
    """``(a, b, c, args)`` for :func:`grouped_gemm`: the groups' random ``A_g``/``B_g``, their
    NaN-filled ``C_g``, and the kernel's arguments (the three address tables, each group's first
    M tile, the groups' row counts)."""
    import torch

    a = [torch.randn(s, K) for s in sizes]
    b = [torch.randn(K, N) for _ in sizes]
    c = [torch.full((s, N), float("nan")) for s in sizes]
    offsets, total = [], 0
    for s in sizes:
        offsets.append(total)
        total += -(-s // block_M)

    def table(ts):
        return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)

    args = (table(a), table(b), table(c), torch.tensor(offsets, dtype=torch.int32), torch.tensor(sizes, dtype=torch.int32))
    return a, b, c, args


def strided_view(n):
    """``out[i] = X[i, 0]``: a column of an ``(n, 3)`` tensor viewed through explicit strides ``(3, 1)``
    at a typed pointer parameter (``T.ptr(T.float32)``)."""

    @T.prim_func
    def main(x_ptr: T.ptr(T.float32), out: T.Tensor([n], "float32")):
        with T.Kernel(1, threads=1):
            X = T.make_tensor(x_ptr, (n, 3), "float32", strides=(3, 1))
            for i in T.serial(n):
                out[i] = X[i, 0]

    return main


def two_kernels(n=8):
    """A tensor made before two ``T.Kernel`` s, with a size read from memory (``sizes[1]``):
    ``out[i] = 2 * X[i]`` for ``i < sizes[1]`` in two launches; each declares ``X`` itself."""

    @T.prim_func
    def main(table: T.Tensor([2], T.ptr), sizes: T.Tensor([2], T.int32), out: T.Tensor([n], "float32")):
        X = T.make_tensor(table[1], (sizes[1],), "float32")
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                if i < X.shape[0]:
                    out[i] = X[i]
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                if i < X.shape[0]:
                    out[i] = out[i] + X[i]

    return main
