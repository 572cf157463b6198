"""TileLang's syntax forms: ``T.Tensor[...]``, ``T.StridedTensor``, ``T.Kernel`` without a grid, ``as (bx,)``."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def _params(func):
    return {p.name: p for p in tilelang.lower(func, target="c").params}


def test_tensor_subscript_is_the_same_declaration_as_the_call():
    @T.prim_func
    def called(A: T.Tensor((8, 4), T.float16), B: T.Tensor((8,), "int32")):
        with T.Kernel(1):
            B[0] = T.int32(A[0, 0])

    @T.prim_func
    def subscripted(A: T.Tensor[(8, 4), T.float16], B: T.Tensor[8, "int32"]):
        with T.Kernel(1):
            B[0] = T.int32(A[0, 0])

    for a, b in zip(_params(called).values(), _params(subscripted).values()):
        assert (a.name, a.dtype, a.shape, a.strides) == (b.name, b.dtype, b.shape, b.strides)


def test_strided_tensor_declares_strides_in_elements_and_accepts_views():
    @T.prim_func
    def copy_column(A: T.StridedTensor[(6, 3), (8, 2), T.float32], B: T.Tensor((6, 3), T.float32)):
        with T.Kernel(6, threads=1) as bx:
            for j in T.serial(3):
                B[bx, j] = A[bx, j]

    (a, _), = [(p, None) for p in _params(copy_column).values() if p.name == "A"]
    assert a.strides == [8, 2]
    kernel = tilelang.compile(copy_column, target="c", execution_backend="cython")
    base = torch.arange(6 * 8, dtype=torch.float32).reshape(6, 8)
    view = base[:, ::2][:, :3]  # strides (8, 2)
    out = torch.empty(6, 3)
    kernel(view, out)
    torch.testing.assert_close(out, view.contiguous())
    with pytest.raises(TypeError, match="strides are required"):
        T.StridedTensor((6, 3), dtype=T.float32)


def test_kernel_without_grid_is_one_block_and_one_element_tuple_target():
    @T.prim_func
    def fill(A: T.Tensor((4,), T.int32), B: T.Tensor((3,), T.int32)):
        with T.Kernel(threads=4):
            for i in T.Parallel(4):
                A[i] = i * 10
        with T.Kernel(3) as (bx,):
            B[bx] = bx + 1

    kernel = tilelang.compile(fill, target="c", execution_backend="cython")
    a = torch.zeros(4, dtype=torch.int32)
    b = torch.zeros(3, dtype=torch.int32)
    kernel(a, b)
    assert a.tolist() == [0, 10, 20, 30] and b.tolist() == [1, 2, 3]


def test_kernel_with_empty_call_and_grid_tuple():
    @T.prim_func
    def one(A: T.Tensor((1,), T.float32), B: T.Tensor((2, 3), T.float32)):
        with T.Kernel():
            A[0] = T.float32(5)
        with T.Kernel((3, 2), threads=1) as (bx, by):
            B[by, bx] = T.float32(by * 3 + bx)

    kernel = tilelang.compile(one, target="c", execution_backend="cython")
    a, b = torch.zeros(1), torch.zeros(2, 3)
    kernel(a, b)
    assert a.item() == 5.0 and b.flatten().tolist() == [0, 1, 2, 3, 4, 5]


def test_kernel_rejects_more_than_three_extents():
    with pytest.raises(ValueError, match="1 to 3 grid extents"):
        T.Kernel(1, 2, 3, 4)
