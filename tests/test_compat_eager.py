"""The eager style of ``@tilelang.jit`` (the body is the kernel), ``T.const``, ``T.empty``,
``get_tir``/``get_kernel_source``/``compile`` on decorated functions."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on  # noqa: E402
from eager_kernels import eager_add  # noqa: E402


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
    with pytest.raises(TypeError, match="T.const M is 5 from X's dimension 0 but Y's dimension 1 is 4"):
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

    with pytest.raises(KernelDefinitionError, match=r"T.prim_func unreturned_output: T.empty output\(s\) B are never returned"):

        @T.prim_func
        def unreturned_output(A: T.Tensor((4,), T.float32)):
            B = T.empty((4,), T.float32)  # noqa: F841
            with T.Kernel(1):
                A[0] = T.float32(0)

    with pytest.raises(Exception, match="T.empty declares an output"):

        @T.prim_func
        def inside(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1):
                B = T.empty((4,), T.float32)  # noqa: F841
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


# -- TileLang's lazy style with outputs: a T.prim_func that declares T.empty and returns it ------


def test_prim_func_returning_empty_outputs_allocates_them_on_every_path():
    """Outputs become trailing parameters in the order of the return; tilelang.compile takes the
    attribute tilelang_out_idx as out_idx (dynamic shapes and a scalar parameter included)."""

    @T.prim_func
    def stats(A, scale: T.float32):
        m = T.dynamic("m")
        A: T.Tensor[[m, 16], T.float32]
        Scaled = T.empty([m, 16], T.float32)
        Sums = T.empty([m], T.float32)
        with T.Kernel(m, threads=1) as bx:
            Sums[bx] = 0.0
            for j in T.serial(16):
                Scaled[bx, j] = A[bx, j] * scale
                Sums[bx] = Sums[bx] + A[bx, j]
        return Sums, Scaled

    assert [int(i) for i in stats.attrs["tilelang_out_idx"]] == [-2, -1]
    assert [p.name for p in stats.params][-2:] == ["Sums", "Scaled"]
    a = torch.randn(5, 16)
    for path in PATHS:
        sums, scaled = compile_on(stats, path)(a, 2.5)
        torch.testing.assert_close(sums, a.sum(1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(scaled, a * 2.5)


def test_prim_func_outputs_inside_a_lazy_jit_function():
    @tilelang.jit
    def plus(n: int, k: float):
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32)):
            B = T.empty((n,), T.float32)
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    B[i] = A[i] + k
            return B

        return main

    a = torch.randn(9)
    torch.testing.assert_close(plus(9, 0.5)(a), a + 0.5)


def test_prim_func_outputs_and_out_idx_conflict():
    @T.prim_func
    def copy(A):
        A: T.Tensor[[8], T.float32]
        B = T.empty([8], T.float32)
        with T.Kernel(1):
            for i in T.serial(8):
                B[i] = A[i]
        return B

    with pytest.raises(ValueError, match=r"Out index conflict: kernel 'copy' returns its T.empty outputs \(out_idx \[-1\]\)"):
        tilelang.compile(copy, out_idx=[-1], target="c")
    a = torch.randn(8)
    torch.testing.assert_close(tilelang.compile(copy, target="c")(a), a)


def test_prim_func_outputs_need_typed_parameters_and_no_const():
    with pytest.raises(KernelDefinitionError, match=r"T.prim_func untyped: parameter\(s\) n have no type"):

        @T.prim_func
        def untyped(A, n):
            A: T.Tensor[[8], T.float32]
            B = T.empty([8], T.float32)
            with T.Kernel(1):
                B[0] = A[0]
            return B

    with pytest.raises(KernelDefinitionError, match=r"T.prim_func with_const: T.const \(N\) takes its value from the arguments"):

        @T.prim_func
        def with_const(A):
            N = T.const("N")
            A: T.Tensor[[N], T.float32]
            B = T.empty([N], T.float32)
            with T.Kernel(1):
                B[0] = A[0]
            return B

    with pytest.raises(KernelDefinitionError, match=r"T.prim_func partial: T.empty output\(s\) C are not returned"):

        @T.prim_func
        def partial(A: T.Tensor((4,), T.float32)):
            B = T.empty((4,), T.float32)
            C = T.empty((4,), T.float32)  # noqa: F841
            with T.Kernel(1):
                B[0] = A[0]
            return B


@T.macro
def _add_twice(local):  # two statements: the macro's body carries a SequentialSpan
    local[0] = local[0] + 1.0
    local[0] = local[0] + 1.0


@tilelang.jit(target="c")
def _uses_a_macro(A):
    A: T.Tensor((4,), T.float32)
    B = T.empty((4,), T.float32)
    with T.Kernel(1, threads=1) as bx:
        local = T.alloc_local((1,), T.float32)
        local[0] = A[0]
        _add_twice(local)
        B[0] = local[0]
    return B


def test_an_eager_kernel_calling_a_macro_of_several_statements():
    """Before: "'SequentialSpan' object has no attribute 'source_name'" when the kernel was
    defined (upstream's examples/hadamard_transform, whose warp_shfl is such a macro)."""
    x = torch.randn(4)
    assert float(_uses_a_macro(x)[0]) == pytest.approx(float(x[0]) + 2.0)


@tilelang.jit
def _row_sums(A, M, K):
    M: T.int32
    K: T.int32
    A: T.Tensor[[M, K], T.float32]  # K is in no output's shape
    C = T.empty((M,), T.float32)
    with T.Kernel(M, threads=1) as bx:
        C[bx] = 0.0
        for k in T.serial(K):
            C[bx] += A[bx, k]
    return C


def test_scalar_parameters_in_an_input_annotation_are_the_tensors_dimensions():
    """``A: T.Tensor[[M, K], ...]`` of scalar parameters M, K: the kernel checks A's shape
    against them (it stopped with "NameError: name 'K' is not defined"; with M also in an
    output's shape, A got dimensions of its own and K = 10 read past A's 5 columns)."""
    a = torch.randn(6, 5)
    torch.testing.assert_close(_row_sums(a, 6, 5), a.sum(1))
    with pytest.raises(ValueError, match=r"argument 'K' \(#2\): value binds symbol 'K' = 10, but argument 'A' bound it to 5"):
        _row_sums(a, 6, 10)
    with pytest.raises(ValueError, match=r"symbol 'M' = 3, but argument 'A' bound it to 6"):
        _row_sums(a, 3, 5)


@tilelang.jit
def _shifted(A: T.ptr, B: T.ptr):
    M, N = T.const("M, N")
    A = T.match_buffer(A, [M, N], T.float32, strides=[T.dynamic("s"), 1])
    B = T.match_buffer(B, [M, N], dtype=T.float32)
    with T.Kernel(M) as bx:
        for j in T.serial(N):
            B[bx, j] = A[bx, j] + 1.0


@tilelang.jit
def _fill_through_pointer(A: T.ptr, n: T.int32):
    with T.Kernel(1) as _:
        B = T.make_tensor(A, (n,), T.float32)
        for i in T.serial(n):
            B[i] = 7.0


def test_a_pointer_parameter_shaped_by_match_buffer_is_a_tensor_parameter():
    """TileLang's ``A: T.ptr`` + ``A = T.match_buffer(A, shape, dtype)`` before the kernel body
    (it stopped with TVM's "Unexpected type for TIR MatchBuffer")."""
    a = torch.randn(8, 10)[:, :5]  # strided rows
    b = torch.zeros(8, 5)
    _shifted(a, b)
    torch.testing.assert_close(b, a + 1)
    with pytest.raises(ValueError, match="T.const N is 5 from A's dimension 1 but B's dimension 1 is 4"):
        _shifted(a, torch.zeros(8, 4))


def test_a_pointer_parameter_of_an_eager_function_takes_the_tensors_address():
    """``A: T.ptr`` without T.match_buffer is a pointer (it was a compile-time value: the torch
    tensor reached T.make_tensor)."""
    a = torch.zeros(5)
    _fill_through_pointer(a, 5)
    assert a.tolist() == [7.0] * 5


@pytest.mark.parametrize("dtype", [torch.float16, "float16", T.float16])
def test_empty_takes_a_torch_dtype_by_position(dtype):
    """``T.empty((M, N), torch.float16)``: a torch dtype in the last place was taken for a dimension
    (TVM's "data must be int or Expr, but got torch.float16")."""

    @tilelang.jit(target="c")
    def cast_copy(A, out_dtype):
        M, N = T.const("M N")
        A: T.Tensor[(M, N), T.float32]
        C = T.empty((M, N), out_dtype)
        with T.Kernel(1) as _:
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j]
        return C

    a = torch.randn(4, 8)
    out = cast_copy(a, dtype)
    assert out.dtype == torch.float16 and torch.equal(out, a.half())


def test_a_call_without_its_tensors_says_which_are_missing():
    """``add()`` said that a T.const had no value (and to give it to ``.compile``); Python's own
    "missing ... required arguments" is what a call without its tensors gets now."""

    add = eager_add()

    with pytest.raises(TypeError, match=r"^add\(\) missing 2 required arguments: 'A', 'B'$"):
        add()
    with pytest.raises(TypeError, match=r"^add\(\) missing 1 required argument: 'A'$"):
        add(B=torch.ones(4))
