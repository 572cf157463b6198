"""Pointer parameters (``a: T.ptr``), pointer tables (``T.Tensor([G], T.ptr)``) and tensors at an
address (``T.make_tensor``), as upstream TileLang kernels use them, on the three CPU paths
against torch; the argument and definition errors; the int64 table annotation."""

from __future__ import annotations

import functools
import pathlib
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.artifact import ScalarParam
from tilelang_core.errors import KernelDefinitionError, LoweringError
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
import pointer_kernels as PK  # noqa: E402


@functools.lru_cache(maxsize=None)
def _scaled_copy(path):
    return compile_on(PK.scaled_copy(), path)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_pointer_parameters_with_run_time_shape(path):
    """A tensor or its address for each pointer; m and n are scalars read at call time."""
    kernel = _scaled_copy(path)
    for m, n in ((10, 7), (3, 16)):
        a = torch.randn(m, n)
        b = torch.full((m, n), float("nan"))
        kernel(a, b, m, n)
        torch.testing.assert_close(b, a * 2)
        b2 = torch.full((m + 1, n), -1.0)  # one more row than m: the guard leaves it alone
        kernel(a.data_ptr(), b2.data_ptr(), m, n)
        torch.testing.assert_close(b2[:m], a * 2)
        assert bool((b2[m] == -1).all())


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_pointer_table_static_and_per_block_index(path):
    G, N = 3, 24
    kernel = compile_on(PK.table_copy(G, N), path)
    srcs = [torch.randn(N).half() for _ in range(G)]
    table = torch.tensor([s.data_ptr() for s in srcs], dtype=torch.int64)
    out = torch.zeros(G, N, dtype=torch.float16)
    first = torch.zeros(N, dtype=torch.float16)
    kernel(table, out, first)
    assert torch.equal(out, torch.stack(srcs))
    assert torch.equal(first, srcs[0])
    table = torch.tensor([s.data_ptr() for s in reversed(srcs)], dtype=torch.int64)  # new addresses, same kernel
    kernel(table, out, first)
    assert torch.equal(out, torch.stack(srcs[::-1])) and torch.equal(first, srcs[-1])


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_tensor_made_before_two_kernels(path):
    """Made before T.Kernel with a size read from memory: declared again in each kernel."""
    kernel = compile_on(PK.two_kernels(8), path)
    x = torch.randn(5)
    out = torch.full((8,), -1.0)
    kernel(torch.tensor([0, x.data_ptr()]), torch.tensor([0, 5], dtype=torch.int32), out)
    torch.testing.assert_close(out[:5], x * 2)
    assert bool((out[5:] == -1).all())


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_grouped_gemm_through_pointer_tables(path):
    sizes, N, K, bm = [5, 12, 17], 16, 24, 8
    kernel = compile_on(PK.grouped_gemm(sizes, N, K, block_M=bm), path)
    a, b, c, args = PK.grouped_gemm_operands(sizes, N, K, block_M=bm)
    kernel(*args)
    for got, x, y in zip(c, a, b):
        torch.testing.assert_close(got, x @ y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_typed_pointer_parameter_with_strides(path):
    kernel = compile_on(PK.strided_view(6), path)
    x = torch.randn(6, 3)
    out = torch.zeros(6)
    kernel(x, out)
    assert torch.equal(out, x[:, 0])


def test_pointer_parameters_in_the_artifact():
    """A pointer parameter is an int64 scalar marked with its device; a table is an int64 tensor."""
    art = lower(PK.scaled_copy(), target="c")
    assert art.params[0] == ScalarParam(name="a_ptr", dtype="int64", pointer="cpu")
    assert art.params[2] == ScalarParam(name="m", dtype="int32")
    table = lower(PK.table_copy(2, 4), target="llvm").params[0]
    assert table.kind == "tensor" and table.dtype == "int64" and table.shape == [2]


@pytest.mark.parametrize("bad, error, given", [
    (None, TypeError, "got NoneType"),
    (1.5, TypeError, "got float"),
    ("0x10", TypeError, "got str"),
    (True, TypeError, "got bool"),
    (torch.empty(4, device="meta"), ValueError, "got a tensor on meta"),
])
@pytest.mark.parametrize("path", [PATHS[0], PATHS[2]], ids=path_id)
def test_bad_pointer_arguments(path, bad, error, given):
    kernel = _scaled_copy(path)
    b = torch.zeros(2, 2)
    with pytest.raises(error) as info:
        kernel(bad, b, 2, 2)
    text = str(info.value)
    assert "argument 'a_ptr' (#0)" in text and "expected a pointer" in text and given in text, text
    with pytest.raises(error, match="argument 'b_ptr' \\(#1\\)"):
        kernel(b, bad, 2, 2)


def _freed(x):
    x.untyped_storage().resize_(0)
    return x


@pytest.mark.parametrize("make, given", [
    (lambda: _freed(torch.ones(2, 2)), "storage holds 0 bytes"),
    (lambda: torch._subclasses.fake_tensor.FakeTensorMode().from_tensor(torch.ones(2, 2)), "data in memory"),
    (lambda: torch.empty(0), "data pointer is NULL (an empty tensor, shape (0,))"),
])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_pointer_argument_without_memory_is_refused(path, make, given):
    """A tensor with no memory behind it (a freed storage, a FakeTensor) for a ``T.ptr``
    parameter: its NULL data pointer crashed the process (SIGSEGV) on every backend; it is now
    refused as a tensor parameter refuses it."""
    kernel = _scaled_copy(path)
    with pytest.raises(ValueError, match="argument 'a_ptr' \\(#0\\): expected a tensor") as info:
        kernel(make(), torch.zeros(2, 2), 2, 2)
    assert given in str(info.value)


@pytest.mark.parametrize("path", [PATHS[0], PATHS[2]], ids=path_id)
def test_a_numpy_integer_is_an_address_like_an_int(path):
    np = pytest.importorskip("numpy")
    kernel = _scaled_copy(path)
    a, b, c = torch.arange(4.0).reshape(2, 2), torch.zeros(2, 2), torch.zeros(2, 2)
    kernel(np.int64(a.data_ptr()), b, 2, 2)
    kernel(a.data_ptr(), c, 2, 2)
    assert torch.equal(b, c) and c.any()
    for array in (np.ones((2, 2), np.float32), np.array([a.data_ptr()]), np.array(a.data_ptr())):
        with pytest.raises(TypeError, match=r"argument 'a_ptr' \(#0\): expected a pointer: .* got ndarray"):
            kernel(array, b, 2, 2)


def test_pointer_table_annotation_is_an_int64_buffer():
    G = 4

    @T.prim_func
    def main(src_ptrs: T.Tensor([G], T.ptr), out: T.Tensor([G, 8], "float16")):
        with T.Kernel(G, threads=1) as bx:
            out[bx, 0] = T.float16(0)

    table = main.buffer_map[main.params[0]]
    assert table.dtype == "int64"
    assert [int(d) for d in table.shape] == [G]


def test_ptr_is_still_callable():
    """T.ptr(dtype, storage_scope) makes a pointer variable, as TileLang's (and TVMScript's) does."""
    typed = T.ptr("float16")
    assert str(typed.ty.element_type) == "float16" and typed.ty.storage_scope == "global"
    assert str(T.ptr(T.float32, "shared").ty.storage_scope) == "shared"
    assert T.ptr().ty.element_type is not None  # untyped: void*


def _make_tensor_error(body):
    """The error of defining a kernel whose body is ``body(a_ptr, x, m, X)``."""
    with pytest.raises(LoweringError) as info:

        @T.prim_func
        def main(a_ptr: T.ptr, X: T.Tensor([4], "float32"), m: T.int32):
            with T.Kernel(1, threads=1):
                body(a_ptr, X[0], m, X)

    return str(info.value)


@pytest.mark.parametrize("case, expected", [
    ("float_ptr", "operand 'ptr': expected a pointer (a T.ptr parameter) or an int64 address such as table[i], got a float32 value"),
    ("tensor_ptr", "operand 'ptr': expected a pointer (a T.ptr parameter) or an int64 address such as table[i], got the tensor X"),
    ("int32_ptr", "got a int32 value"),
    ("python_ptr", "got float 1.5"),
    ("bad_shape", "operand 'shape': expected ints or integer expressions (m, n + 1), got 'n'"),
    ("float_shape", "operand 'shape': expected ints or integer expressions (m, n + 1), got 2.5"),
    ("negative_shape", "operand 'shape': expected sizes >= 0, got -1"),
    ("bad_dtype", "operand 'dtype': expected an element dtype such as T.float16 or 'float32', got 'floaty'"),
    ("bad_strides", "operand 'strides': expected 2 strides (one per dimension), got 1"),
])
def test_make_tensor_definition_errors(case, expected):
    bodies = {
        "float_ptr": lambda p, x, m, X: T.make_tensor(x, (m,), "float32"),
        "tensor_ptr": lambda p, x, m, X: T.make_tensor(X, (m,), "float32"),
        "int32_ptr": lambda p, x, m, X: T.make_tensor(m, (m,), "float32"),
        "python_ptr": lambda p, x, m, X: T.make_tensor(1.5, (m,), "float32"),
        "bad_shape": lambda p, x, m, X: T.make_tensor(p, (m, "n"), "float32"),
        "float_shape": lambda p, x, m, X: T.make_tensor(p, (2.5,), "float32"),
        "negative_shape": lambda p, x, m, X: T.make_tensor(p, (-1,), "float32"),
        "bad_dtype": lambda p, x, m, X: T.make_tensor(p, (m,), "floaty"),
        "bad_strides": lambda p, x, m, X: T.make_tensor(p, (m, 4), "float32", strides=(4,)),
    }
    text = _make_tensor_error(bodies[case])
    assert "T.make_tensor(" in text and expected in text, text
    assert text.split(":")[0].endswith("test_compat_pointers.py"), text  # file:line of the statement


def test_make_tensor_outside_a_kernel():
    with pytest.raises(KernelDefinitionError, match="T.make_tensor"):
        T.make_tensor(0, (4,), "float32")


def test_pointer_parameters_refused_on_metal():
    with pytest.raises(LoweringError, match="pointer parameters \\(T.ptr\\).*metal"):
        lower(PK.scaled_copy(grid=2), target="metal")
