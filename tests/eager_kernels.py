"""Eager-style @tilelang.jit functions shared by tests (an importable module; each call makes a new
function, so each test starts without specialisations)."""

from __future__ import annotations

import tilelang
import tilelang.language as T


def eager_add():
    """``add(A, B) -> A + B`` of two float32 vectors of one size ``N`` (a ``T.const``), on target c."""

    @tilelang.jit(target="c")
    def add(A, B):
        N = T.const("N")
        A: T.Tensor[(N,), T.float32]
        B: T.Tensor[(N,), T.float32]
        C = T.empty((N,), T.float32)
        with T.Kernel(1) as _:
            for i in T.Parallel(N):
                C[i] = A[i] + B[i]
        return C

    return add
