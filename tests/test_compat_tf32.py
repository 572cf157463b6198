"""``T.tfloat32``: TensorFloat-32 names are float32 here (same storage, full float32 compute)."""

from __future__ import annotations

import torch

import tilelang
import tilelang.language as T
from tilelang.language.dtypes import _all_dtypes


def test_tfloat32_names_are_float32():
    assert T.tfloat32 == "float32" and T.tfloat32x4 == "float32x4"
    assert T.dtype("tfloat32") is T.float32 or T.dtype("tfloat32") == T.float32
    assert T.dtype("tfloat32x8") == "float32x8"
    assert T.tfloat32.as_torch() is torch.float32
    assert {"tfloat32", "tfloat32x2", "tfloat32x64"} <= set(_all_dtypes)


def test_tfloat32_kernel_matches_torch():
    @T.prim_func
    def mm(A: T.Tensor((16, 8), T.tfloat32), B: T.Tensor((8, 16), T.tfloat32), C: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=16):
            a_tile = T.alloc_shared((16, 8), T.tfloat32)
            b_tile = T.alloc_shared((8, 16), T.tfloat32)
            acc = T.alloc_fragment((16, 16), T.float32)
            T.copy(A, a_tile)
            T.copy(B, b_tile)
            T.clear(acc)
            T.gemm(a_tile, b_tile, acc)
            T.copy(acc, C)

    kernel = tilelang.compile(mm, target="c")
    a, b = torch.randn(16, 8), torch.randn(8, 16)
    c = torch.empty(16, 16)
    kernel(a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)


def test_unsigned_constants_past_int64():
    big = T.uint64(0xFFFFFFFFFFFFFFFF)
    assert str(big.dtype) == "uint64" and int(big.value) == 0xFFFFFFFFFFFFFFFF
    assert int(T.int64(-(1 << 63)).value) == -(1 << 63)
