"""A small static vector addition kernel for tests that need any kernel that builds and runs."""

from __future__ import annotations

import tilelang.language as T

#: The vectors' length.
N = 256


def vadd():
    """``C = A + B`` for float32 vectors of length :data:`N`, two blocks of 128."""

    @T.prim_func
    def vadd(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                C[bx * 128 + i] = A[bx * 128 + i] + B[bx * 128 + i]

    return vadd
