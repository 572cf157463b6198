"""Kernel forms from TileLang code: parameters typed in the body, tuple assignment (swaps),
``T.fill`` over a region bounded by ``T.alloc_var`` values, ``T.GemmWarpPolicy``."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def test_parameters_typed_in_the_body():
    @T.prim_func
    def add_one(A, B):
        A: T.Tensor[[8, 4], T.float32]
        B: T.Tensor[[8, 4], T.float32]
        with T.Kernel(1):
            for i, j in T.grid(8, 4):
                B[i, j] = A[i, j] + 1.0

    assert [str(p) for p in add_one.params] == ["A", "B"]
    kernel = tilelang.compile(add_one, out_idx=[-1])
    a = torch.randn(8, 4)
    torch.testing.assert_close(kernel(a), a + 1)


def test_a_parameter_typed_nowhere_keeps_tvmscripts_error():
    with pytest.raises(Exception, match="Type annotation required"):

        @T.prim_func
        def untyped(A, B):
            A: T.Tensor[[4], T.float32]
            with T.Kernel(1):
                for i in T.serial(4):
                    B[i] = A[i]


def test_tuple_assignment_swaps_elements_and_variables():
    @T.prim_func
    def swaps(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            A[0], A[1] = A[1], A[0]
            a = T.alloc_var(T.float32, A[2])
            b = T.alloc_var(T.float32, A[3])
            a, b = b, a + 10.0
            A[2], A[3] = a, b

    kernel = tilelang.compile(swaps)
    data = torch.tensor([1.0, 2.0, 3.0, 4.0])
    kernel(data)
    torch.testing.assert_close(data, torch.tensor([2.0, 1.0, 4.0, 13.0]))


def test_fill_over_a_region_bounded_by_alloc_vars():
    n = T.symbolic("n")

    @T.prim_func
    def fill_range(x: T.Tensor[(n,), "int64"], lo: T.int32, hi: T.int32):
        with T.Kernel(1, threads=1):
            a = T.alloc_var(T.int32, lo)
            b = T.alloc_var(T.int32, hi)
            T.fill(x[a:b], 7)

    kernel = tilelang.compile(fill_range)
    x = torch.zeros(64, dtype=torch.int64)
    kernel(x, 10, 20)
    expected = torch.zeros(64, dtype=torch.int64)
    expected[10:20] = 7
    torch.testing.assert_close(x, expected)


def test_gemm_warp_policy_is_accepted_without_effect():
    @T.prim_func
    def mm(A: T.Tensor((16, 8), T.float32), B: T.Tensor((8, 16), T.float32), C: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=1):
            A_s = T.alloc_shared((16, 8), T.float32)
            B_s = T.alloc_shared((8, 16), T.float32)
            C_l = T.alloc_fragment((16, 16), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_l, C)

    assert {p.name for p in T.GemmWarpPolicy} == {"Square", "FullRow", "FullCol"}
    kernel = tilelang.compile(mm, out_idx=[2])
    a, b = torch.randn(16, 8), torch.randn(8, 16)
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
