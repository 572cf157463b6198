"""Python int literals in bitwise and shift operators keep their full value, and minus of an unsigned
value is its two's complement (language/literals.py).

TVM 0.27 cuts such a literal to 32 bits: ``X[i] & 0x7FFFFFFFFFFFFFFF`` compiled to ``X[i] & -1``
and ``X[i] ^ 0x100000000`` to ``X[i] ^ 0``, with no error; a uint32 operand with a literal of
2**31 or more failed. Here the kernels are compiled with each CPU backend, run on torch tensors
and compared with NumPy; the CUDA source is checked for the literals.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

N = 64
I64_COLUMNS = 7
U32_COLUMNS = 5


def _mask_kernel():
    @T.prim_func
    def masks(X: T.Tensor((N,), T.int64), U: T.Tensor((N,), T.uint32),
              Y: T.Tensor((N, I64_COLUMNS), T.int64), V: T.Tensor((N, U32_COLUMNS), T.uint32)):
        with T.Kernel(1, threads=N):
            for i in T.Parallel(N):
                Y[i, 0] = X[i] & 0x7FFFFFFFFFFFFFFF
                Y[i, 1] = X[i] | 0xFFFFFFFF
                Y[i, 2] = 0x1FFFFFFFF ^ X[i]
                Y[i, 3] = T.bitwise_and(X[i], 0x7FFFFFFF00000000)
                Y[i, 4] = 0x100000000 >> (X[i] & 31)
                Y[i, 5] = X[i] & -0x100000000
                Y[i, 6] = T.bitwise_or(0x4000000000000000, X[i] >> 40)
                V[i, 0] = U[i] & 0xFFFF0000
                V[i, 1] = U[i] | 0x80000000
                V[i, 2] = U[i] ^ -1
                V[i, 3] = 0xF0000000 & U[i]
                V[i, 4] = T.bitwise_xor(U[i], 0xDEADBEEF)

    return masks


def _expected(x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.stack([
        x & 0x7FFFFFFFFFFFFFFF,
        x | 0xFFFFFFFF,
        np.int64(0x1FFFFFFFF) ^ x,
        x & 0x7FFFFFFF00000000,
        np.int64(0x100000000) >> (x & 31),
        x & np.int64(-0x100000000),
        np.int64(0x4000000000000000) | (x >> 40),
    ], axis=1)
    v = np.stack([
        u & np.uint32(0xFFFF0000),
        u | np.uint32(0x80000000),
        u ^ np.uint32(0xFFFFFFFF),
        np.uint32(0xF0000000) & u,
        u ^ np.uint32(0xDEADBEEF),
    ], axis=1)
    return y, v


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_wide_literals_give_numpys_results(backend, target):
    kernel = tilelang.compile(_mask_kernel(), target=target, execution_backend=backend)
    rng = np.random.default_rng(7)
    x = rng.integers(-(2**63), 2**63 - 1, size=N, dtype=np.int64)
    x[:4] = [-1, 0, 2**40 + 3, -(2**62)]
    u = rng.integers(0, 2**32 - 1, size=N, dtype=np.uint32)
    u[:2] = [0xFFFFFFFF, 0]
    y = torch.zeros((N, I64_COLUMNS), dtype=torch.int64)
    v = torch.zeros((N, U32_COLUMNS), dtype=torch.uint32)
    kernel(torch.from_numpy(x), torch.from_numpy(u), y, v)
    want_y, want_v = _expected(x, u)
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(v.numpy(), want_v)


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_the_generated_source_holds_the_literals(target):
    source = tilelang.lower(_mask_kernel(), target=target).kernel_source
    for literal in ("9223372036854775807", "4294967295", "8589934591", "9223372032559808512",
                    "4294967296", "-4294967296", "4611686018427387904", "2147483648", "3735928559"):
        assert literal in source, (literal, source)


def test_a_negative_literal_next_to_an_unsigned_operand_is_its_twos_complement():
    u = T.uint32()
    assert int((u & -1).b.value) == 0xFFFFFFFF
    assert int((-16 | u).a.value) == 0xFFFFFFF0


def test_a_literal_the_operand_cannot_hold_is_refused_with_the_kernel_line():
    with pytest.raises(LoweringError) as info:

        @T.prim_func
        def too_wide(X: T.Tensor((N,), T.int32), Y: T.Tensor((N,), T.int32)):
            with T.Kernel(1, threads=N):
                for i in T.Parallel(N):
                    Y[i] = X[i] & 0x1FFFFFFFF  # the mask line

    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert f"{__file__}:" in message and "8589934591" in message
    assert "int32" in message and "-2147483648..2147483647" in message and "T.int64(8589934591)" in message
    line = message.split(": ", 1)[0].rsplit(":", 1)[1]
    with open(__file__) as f:
        assert "# the mask line" in f.read().splitlines()[int(line) - 1]


@pytest.mark.parametrize("expr,dtype,value", [
    (lambda: T.int32() | 0x80000000, "int32", 2147483648),
    (lambda: T.uint8() & 0x100, "uint8", 256),
    (lambda: 0xFFFFFFFFFFFFFFFF & T.int64(), "int64", 18446744073709551615),
    (lambda: T.int32() << 0x100000000, "int32", 4294967296),
    (lambda: T.uint32() ^ -0x80000001, "uint32", -2147483649),
])
def test_out_of_range_literals_outside_a_kernel(expr, dtype, value):
    with pytest.raises(LoweringError, match=rf"the literal {value} does not fit the {dtype} operand"):
        expr()


def test_expressions_and_small_literals_are_unchanged():
    x, y = T.int64(), T.int64()
    both = x & y
    assert both.a.same_as(x) and both.b.same_as(y)
    assert str(T.int32() & 0xFF).endswith("& 255")
    with pytest.raises(Exception, match="integer"):  # a float operand: still TVM's own error
        T.int32() & 2.0


def _float64_kernel():
    @T.prim_func
    def wide(X: T.Tensor((N,), T.float64), Y: T.Tensor((N, 4), T.float64)):
        with T.Kernel(1, threads=N):
            for i in T.Parallel(N):
                Y[i, 0] = X[i] * 1e300
                Y[i, 1] = T.max(X[i] * -1e300, -1e308)
                Y[i, 2] = T.if_then_else(X[i] < 1e-300, -1e300, X[i] / 1e300)
                Y[i, 3] = 1e300 - T.min(X[i], 1e300)

    return wide


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_float64_kernels_take_literals_beyond_float32s_range(backend, target):
    kernel = tilelang.compile(_float64_kernel(), target=target, execution_backend=backend)
    x = torch.linspace(-3.0, 3.0, N, dtype=torch.float64)
    y = torch.zeros((N, 4), dtype=torch.float64)
    kernel(x, y)
    want = torch.stack([
        x * 1e300,
        torch.clamp(x * -1e300, min=-1e308),
        torch.where(x < 1e-300, torch.tensor(-1e300, dtype=torch.float64), x / 1e300),
        1e300 - torch.clamp(x, max=1e300),
    ], dim=1)
    assert torch.equal(y, want)


def test_float_literals_next_to_narrower_floats_keep_tvms_handling():
    h, f = T.float16(), T.float32()
    assert str((h * 0.1).ty.dtype) == "float32"  # TVM promotes: the literal is a float32 constant
    with pytest.raises(Exception, match="exceeds maximum of float32"):
        f * 1e39
    assert str((T.float64() * 1e300).b.ty.dtype) == "float64"


def _negation_kernel(dtype):
    @T.prim_func
    def negate(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=N):
            for i in T.Parallel(N):
                Y[i] = -X[i]

    return negate


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_minus_of_an_unsigned_value_is_its_twos_complement(backend, target, dtype):
    # TVM 0.27 writes -x as x * -1 and refused every unsigned x ("cannot make uint from negative value")
    kernel = tilelang.compile(_negation_kernel(dtype), target=target, execution_backend=backend)
    info = np.iinfo(dtype)
    x = np.random.default_rng(2).integers(0, info.max, size=N, dtype=dtype, endpoint=True)
    x[:3] = [0, 1, info.max]
    y = torch.zeros(N, dtype=getattr(torch, dtype))
    kernel(torch.from_numpy(x), y)
    assert y.numpy().tolist() == (np.zeros_like(x) - x).tolist()


@pytest.mark.parametrize("target", ["cuda", "metal"])
def test_minus_of_an_unsigned_value_lowers_for_gpus(target):
    source = tilelang.lower(_negation_kernel("uint32"), target=target).kernel_source
    assert "X_ptr" in source


def test_minus_of_signed_and_float_values_is_tvms():
    for dtype, text in (("int32", "x * -1"), ("float32", "x * T.float32(-1.0)")):
        assert str(-tvm_var("x", dtype)) == text


def tvm_var(name, dtype):
    from tvm import tirx

    return tirx.Var(name, dtype)


def test_zero_minus_an_unsigned_value_is_not_folded_to_zero():
    # TVM's LLVM code generator marks unsigned subtraction as never wrapping (nuw): the LLVM path computed 0
    @T.prim_func
    def zero_minus(X: T.Tensor((N,), T.uint32), Y: T.Tensor((N, 2), T.uint32)):
        with T.Kernel(1, threads=N):
            for i in T.Parallel(N):
                Y[i, 0] = T.uint32(0) - X[i]
                Y[i, 1] = 0 - X[i]

    x = np.random.default_rng(4).integers(0, 2**32 - 1, size=N, dtype=np.uint32, endpoint=True)
    x[:2] = [0, 1]
    for backend, target in (("cython", "c"), ("tvm_ffi", "llvm")):
        kernel = tilelang.compile(zero_minus, target=target, execution_backend=backend)
        y = torch.zeros((N, 2), dtype=torch.uint32)
        kernel(torch.from_numpy(x), y)
        want = (np.zeros_like(x) - x).tolist()
        assert y[:, 0].numpy().tolist() == want and y[:, 1].numpy().tolist() == want, target


def test_the_wrappers_install_once():
    from tvm.ir import _overload_prim_expr
    from tvm.ir.prim import _ffi_api

    from tilelang_core.language import literals

    sub, neg = _ffi_api._OpSub, _overload_prim_expr.__neg__
    literals.install()
    assert _ffi_api._OpSub is sub and _overload_prim_expr.__neg__ is neg
