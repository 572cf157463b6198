"""Chained stores in kernels: ``A[i] = B[i] = value``."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def test_chained_stores_write_every_target():
    @T.prim_func
    def fill3(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32), C: T.Tensor((32,), T.int32), X: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = B[i] = X[i] * 2.0
                C[i] = C[31 - i] = 7

    kernel = tilelang.compile(fill3, target="c")
    a, b, x = torch.zeros(32), torch.zeros(32), torch.randn(32)
    c = torch.zeros(32, dtype=torch.int32)
    kernel(a, b, c, x)
    torch.testing.assert_close(a, x * 2)
    torch.testing.assert_close(b, x * 2)
    assert torch.all(c == 7)


def test_chain_reading_its_own_target_is_refused():
    with pytest.raises(Exception, match="chained assignment whose value reads one of its targets"):

        @T.prim_func
        def bump(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                for i in T.serial(8):
                    A[i] = B[i] = B[i] + 1.0
