"""Blocked matrix multiplication in the style of TileLang's CPU matmul: one block per output tile,
an accumulator tile in registers, a reduction loop over K tiles."""

from __future__ import annotations

import torch

import tilelang.language as T
from _example import Example


def matmul(M, N, K, block_M=32, block_N=32, block_K=32, dtype="float32", accum_dtype="float32"):
    """C = A @ B with A (M, K), B (K, N), tiles of block_M x block_N accumulated over block_K slices."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.cast(0, accum_dtype)
            for ko in T.serial(T.ceildiv(K, block_K)):
                for kk in T.serial(block_K):
                    for i, j in T.Parallel(block_M, block_N):
                        if by * block_M + i < M and bx * block_N + j < N and ko * block_K + kk < K:
                            acc[i, j] = acc[i, j] + T.cast(A[by * block_M + i, ko * block_K + kk], accum_dtype) * T.cast(
                                B[ko * block_K + kk, bx * block_N + j], accum_dtype
                            )
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M and bx * block_N + j < N:
                    C[by * block_M + i, bx * block_N + j] = T.cast(acc[i, j], dtype)

    return main


EXAMPLES = [
    Example(
        name="matmul[256x256x256]",
        build=lambda: matmul(256, 256, 256),
        inputs=lambda: (torch.randn(256, 256), torch.randn(256, 256)),
        reference=torch.matmul,
        rtol=1e-4,
        atol=1e-3,
    ),
    Example(
        name="matmul[100x70x50 ragged]",
        build=lambda: matmul(100, 70, 50),
        inputs=lambda: (torch.randn(100, 50), torch.randn(50, 70)),
        reference=torch.matmul,
        rtol=1e-4,
        atol=1e-3,
    ),
]
