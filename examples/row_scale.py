"""A kernel with a dynamic dimension: scale each row of an (m, 64) matrix by a per-row factor."""

from __future__ import annotations

import torch

import tilelang.language as T
from _example import Example


def row_scale(M, N=64, block_M=16, dtype="float32"):
    """Y[i, j] = X[i, j] * S[i] for a matrix with a dynamic number of rows."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = X[bx * block_M + i, j] * S[bx * block_M + i]

    return main


EXAMPLES = [
    Example(
        name="row_scale[dynamic m=333]",
        build=lambda: row_scale(T.dynamic("m")),
        inputs=lambda: (torch.randn(333, 64), torch.randn(333)),
        reference=lambda x, s: x * s[:, None],
    ),
]
