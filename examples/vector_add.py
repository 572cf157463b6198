"""Vector addition: the hello world of tile kernels, with static and dynamic length."""

from __future__ import annotations

import torch

import tilelang.language as T
from _example import Example


def vector_add(N, block=128, dtype="float32"):
    """C = A + B for vectors of length N (an int or a T.dynamic symbol)."""

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


EXAMPLES = [
    Example(
        name="vector_add[static 4096]",
        build=lambda: vector_add(4096),
        inputs=lambda: (torch.randn(4096), torch.randn(4096)),
        reference=torch.add,
    ),
    Example(
        name="vector_add[dynamic n=1000]",
        build=lambda: vector_add(T.dynamic("n")),
        inputs=lambda: (torch.randn(1000), torch.randn(1000)),
        reference=torch.add,
    ),
]
