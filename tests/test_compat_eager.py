"""The eager style of ``@tilelang.jit`` (the body is the kernel), ``T.const``, ``T.empty``,
``get_tir``/``get_kernel_source``/``compile`` on decorated functions."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError


@tilelang.jit
def scale(X, factor: T.float32, block: int = 64):
    N = T.const("N")
    X: T.Tensor[(N,), T.float32]
    Y = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            if bx * block + i < N:
                Y[bx * block + i] = X[bx * block + i] * factor
    return Y


def test_eager_function_compiles_per_constants_and_returns_outputs():
    x = torch.randn(100)
    torch.testing.assert_close(scale(x, 3.0), x * 3.0)
    torch.testing.assert_close(scale(x, -1.0), -x)  # a scalar parameter: same kernel
    assert len(scale.kernels) == 1
    y = torch.randn(37)
    torch.testing.assert_close(scale(y, 2.0, block=16), y * 2.0)  # new N and block: new kernel
    assert len(scale.kernels) == 2


def test_eager_in_place_kernel_with_two_constants_and_dtype_parameter():
    @tilelang.jit
    def transpose(X, Y, dtype: T.dtype = T.float32):
        M, N = T.const("M N")
        X: T.Tensor[[M, N], dtype]
        Y: T.Tensor[[N, M], dtype]
        with T.Kernel(M, threads=1) as (i,):
            for j in T.serial(N):
                Y[j, i] = X[i, j]

    x = torch.randn(5, 7)
    y = torch.empty(7, 5)
    assert transpose(x, y) is None
    torch.testing.assert_close(y, x.T.contiguous())
    xh = x.half()
    yh = torch.empty(7, 5, dtype=torch.float16)
    transpose(xh, yh, T.float16)
    torch.testing.assert_close(yh, xh.T.contiguous())
    with pytest.raises(TypeError, match="T.const M is 5 from another argument but Y's dimension 1 is 4"):
        transpose(x, torch.empty(7, 4))


def test_eager_constants_from_strides_and_dynamic_dimensions():
    @tilelang.jit
    def first_column(X, Y):
        N = T.dynamic("N")
        S = T.const("S")
        X: T.StridedTensor[[N, 1], [S, 1], T.float32]
        Y: T.Tensor[[N], T.float32]
        with T.Kernel(N, threads=1) as bx:
            Y[bx] = X[bx, 0]

    base = torch.randn(6, 4)
    out = torch.empty(6)
    first_column(base[:, :1], out)
    torch.testing.assert_close(out, base[:, 0])
    bigger = torch.randn(9, 4)
    out9 = torch.empty(9)
    first_column(bigger[:, :1], out9)  # same stride, another N: the same (dynamic) kernel
    torch.testing.assert_close(out9, bigger[:, 0])
    assert len(first_column.kernels) == 1


def test_eager_get_tir_compile_and_source_with_specs_and_names():
    @tilelang.jit
    def fill(A, value: int = 7):
        M = T.const("M")
        A: T.Tensor[(M,), T.int32]
        with T.Kernel(1, threads=1):
            for i in T.serial(M):
                A[i] = value

    func = fill.get_tir(T.Tensor((12,), T.int32))
    assert tilelang.lower(func, target="c").params[0].shape == [12]
    kernel = fill.compile(M=5, value=3)
    a = torch.zeros(5, dtype=torch.int32)
    kernel(a)
    assert a.tolist() == [3] * 5
    assert "fill" in fill.get_kernel_source(M=5, value=3)
    with pytest.raises(TypeError, match="cannot tell the value of T.const M"):
        fill.compile()


def test_eager_functions_without_parameters_and_several_outputs():
    @tilelang.jit
    def iota_and_square():
        A = T.empty((6,), T.int32)
        B = T.empty(6, dtype=T.int32)
        with T.Kernel(1) as _:
            for i in T.serial(6):
                A[i] = i
                B[i] = i * i
        return B, A

    b, a = iota_and_square()
    assert a.tolist() == list(range(6)) and b.tolist() == [i * i for i in range(6)]


def test_eager_errors_are_clear():
    with pytest.raises(KernelDefinitionError, match="out_idx is for functions that return a prim_func"):

        @tilelang.jit(out_idx=-1)
        def with_out_idx(A):
            A: T.Tensor[(4,), T.float32]
            with T.Kernel(1):
                A[0] = T.float32(0)

        with_out_idx(torch.zeros(4))

    @tilelang.jit
    def unreturned():
        Y = T.empty((4,), T.float32)
        with T.Kernel(1):
            Y[0] = T.float32(0)

    with pytest.raises(KernelDefinitionError, match="never returned"):
        unreturned()

    @T.prim_func
    def not_here(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1):
            A[0] = T.float32(0)

    with pytest.raises(Exception, match="T.empty declares an output"):

        @T.prim_func
        def inside(A: T.Tensor((4,), T.float32)):
            B = T.empty((4,), T.float32)  # noqa: F841
            with T.Kernel(1):
                A[0] = T.float32(0)


def test_lazy_functions_get_tir_and_source():
    @tilelang.jit(out_idx=-1)
    def ones(n):
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    A[i] = T.float32(1)

        return main

    assert ones.get_tir(8).params[0] is not None
    assert "main" in ones.get_kernel_source(8)
    assert ones(8)().tolist() == [1.0] * 8
    assert ones.mode == "lazy"


def test_const_outside_eager_is_a_symbol():
    M, N = T.const("M, N")
    assert (M.name, N.name) == ("M", "N")
    with pytest.raises(ValueError):
        T.const("1x")
