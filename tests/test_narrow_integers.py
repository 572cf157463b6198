"""8- and 16-bit integer arithmetic wraps around on target c and in CUDA sources (lowering/narrow_integers.py).

TVM's C and CUDA code generators printed uint8/uint16 ``+ - * << ~`` as they are, and C's integer
promotion computed them in ``int``: ``(X[i] + Y[i]) >> 1`` of 200 and 100 gave 150 instead of 22
on cython/c, tvm_ffi/c and ctypes/c (llvm was right); for int8, ``T.cast(a + b, "int32")`` of 100
and 100 gave 200 instead of -56. Each kernel here runs on every CPU pair, with
a static and a dynamic size, and is compared with NumPy's wrapping arithmetic; the CUDA source is
checked for the narrowing casts and compiled with nvcc (no GPU here).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

N = 100  # not a multiple of BLOCK: a partial last block
BLOCK = 64
NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)

#: (expression on uint8 x, y, as written in the kernel, NumPy reference on uint8 arrays)
U8_COLUMNS = [
    ("(x + y) >> 1", lambda x, y: (x + y) >> np.uint8(1)),
    ("x + y < x", lambda x, y: (x + y) < x),
    ("x * y", lambda x, y: x * y),
    ("~x", lambda x, y: ~x),
    ("x << 3", lambda x, y: x << np.uint8(3)),
    ("-x", lambda x, y: -x),
    ("x - y", lambda x, y: x - y),
    ("(x * y + 7) // 3", lambda x, y: (x * y + np.uint8(7)) // np.uint8(3)),
    ("x + y + y", lambda x, y: x + y + y),
]
#: the same on uint16 a, b (a * a and a << 9 overflowed C's int: undefined behaviour)
U16_COLUMNS = [
    ("a * a", lambda a, b: a * a),
    ("(a + b) >> 1", lambda a, b: (a + b) >> np.uint16(1)),
    ("a << 9", lambda a, b: a << np.uint16(9)),
    ("~a", lambda a, b: ~a),
    ("a + b < a", lambda a, b: (a + b) < a),
    ("a - b", lambda a, b: a - b),
]


def wrapping_kernel(n):
    """W[i, c] = uint16(column c of uint8 X[i], Y[i]); V[i, c] = uint32(column c of uint16 A[i], B[i])."""

    @T.prim_func
    def narrow_wraps(X: T.Tensor((n,), T.uint8), Y: T.Tensor((n,), T.uint8), A: T.Tensor((n,), T.uint16),
                     B: T.Tensor((n,), T.uint16), W: T.Tensor((n, len(U8_COLUMNS)), T.uint16),
                     V: T.Tensor((n, len(U16_COLUMNS)), T.uint32)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for k in T.Parallel(BLOCK):
                if bx * BLOCK + k < n:
                    i = bx * BLOCK + k
                    x, y, a, b = X[i], Y[i], A[i], B[i]
                    W[i, 0] = T.Cast("uint16", (x + y) >> T.uint8(1))
                    W[i, 1] = T.if_then_else(x + y < x, T.uint16(1), T.uint16(0))
                    W[i, 2] = T.Cast("uint16", x * y)
                    W[i, 3] = T.Cast("uint16", ~x)
                    W[i, 4] = T.Cast("uint16", x << T.uint8(3))
                    W[i, 5] = T.Cast("uint16", -x)
                    W[i, 6] = T.Cast("uint16", x - y)
                    W[i, 7] = T.Cast("uint16", (x * y + T.uint8(7)) // T.uint8(3))
                    W[i, 8] = T.Cast("uint16", x + y + y)
                    V[i, 0] = T.Cast("uint32", a * a)
                    V[i, 1] = T.Cast("uint32", (a + b) >> T.uint16(1))
                    V[i, 2] = T.Cast("uint32", a << T.uint16(9))
                    V[i, 3] = T.Cast("uint32", ~a)
                    V[i, 4] = T.if_then_else(a + b < a, T.uint32(1), T.uint32(0))
                    V[i, 5] = T.Cast("uint32", a - b)

    return narrow_wraps


def _inputs():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, N, dtype=np.uint8)
    y = rng.integers(0, 256, N, dtype=np.uint8)
    a = rng.integers(0, 1 << 16, N, dtype=np.uint16)
    b = rng.integers(0, 1 << 16, N, dtype=np.uint16)
    x[:6], y[:6] = [200, 255, 0, 1, 128, 100], [100, 1, 0, 255, 128, 100]
    a[:5], b[:5] = [65535, 40000, 0, 1, 32768], [1, 40000, 0, 65535, 32768]
    return x, y, a, b


@pytest.mark.parametrize("size", ["static", "dynamic"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_uint8_and_uint16_arithmetic_wraps_like_numpy(backend, target, size):
    kernel = tilelang.compile(wrapping_kernel(N if size == "static" else T.dynamic("n")), target=target,
                              execution_backend=backend)
    x, y, a, b = _inputs()
    w = torch.zeros((N, len(U8_COLUMNS)), dtype=torch.uint16)
    v = torch.zeros((N, len(U16_COLUMNS)), dtype=torch.uint32)
    kernel(*(torch.from_numpy(t) for t in (x, y, a, b)), w, v)
    with np.errstate(over="ignore"):
        for column, (text, ref) in enumerate(U8_COLUMNS):
            assert w[:, column].tolist() == ref(x, y).astype(np.uint16).tolist(), (text, backend, target, size)
        for column, (text, ref) in enumerate(U16_COLUMNS):
            assert v[:, column].tolist() == ref(a, b).astype(np.uint32).tolist(), (text, backend, target, size)


def test_the_c_source_narrows_only_scalar_8_and_16_bit_results():
    @T.prim_func
    def mixed(X: T.Tensor((8,), T.uint8), S: T.Tensor((8,), T.int8), U: T.Tensor((8,), T.uint32),
              Z: T.Tensor((8,), T.uint8), R: T.Tensor((8,), T.int8), Q: T.Tensor((8,), T.uint32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                Z[i] = (X[i] + X[i] + T.uint8(1)) >> T.uint8(1)
                R[i] = S[i] + S[i]
                Q[i] = U[i] + U[i]

    source = lower(mixed, target="c").device_source
    # one narrowing for the chain x + x + 1 (its inner sum is not narrowed twice)
    assert "(((uint8_t)((((uint32_t)X_ptr[i]) + ((uint32_t)X_ptr[i])) + (uint32_t)1)) >> (uint8_t)1)" in source, source
    assert "R_ptr[i] = ((int8_t)(((uint32_t)S_ptr[i]) + ((uint32_t)S_ptr[i])));" in source, source
    assert "Q_ptr[i] = (U_ptr[i] + U_ptr[i]);" in source, source  # uint32 wraps in C as it is


def test_the_cuda_source_narrows_uint8_and_uint16_results():
    source = lower(wrapping_kernel(N), target="cuda").device_source
    assert "((uchar)(((uint)x[0]) + ((uint)y[0])))" in source, source
    assert "((ushort)(((uint)a[0]) * ((uint)a[0])))" in source, source
    assert "((uchar)(~((uint)x[0])))" in source, source


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("size", ["static", "dynamic"])
def test_the_cuda_source_compiles_with_nvcc(size):
    kernel = tilelang.compile(wrapping_kernel(N if size == "static" else T.dynamic("n")), target="cuda",
                              execution_backend="cython")
    assert "((uchar)(((uint)x[0]) + ((uint)y[0])))" in kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")
def test_uint8_and_uint16_arithmetic_wraps_on_a_cuda_device():
    kernel = tilelang.compile(wrapping_kernel(T.dynamic("n")), target="cuda")
    x, y, a, b = _inputs()
    w = torch.zeros((N, len(U8_COLUMNS)), dtype=torch.uint16, device="cuda")
    v = torch.zeros((N, len(U16_COLUMNS)), dtype=torch.uint32, device="cuda")
    kernel(*(torch.from_numpy(t).cuda() for t in (x, y, a, b)), w, v)
    with np.errstate(over="ignore"):
        for column, (text, ref) in enumerate(U8_COLUMNS):
            assert w[:, column].cpu().tolist() == ref(x, y).astype(np.uint16).tolist(), text
        for column, (text, ref) in enumerate(U16_COLUMNS):
            assert v[:, column].cpu().tolist() == ref(a, b).astype(np.uint32).tolist(), text


#: (expression on int8 x, y or int16 a, b, NumPy reference): two's complement, as torch and llvm compute them
SIGNED_COLUMNS = [
    ("int32(x + y)", lambda x, y, a, b: (x + y).astype(np.int32)),
    ("int32((x * y) >> 1)", lambda x, y, a, b: ((x * y) >> np.int8(1)).astype(np.int32)),
    ("int32(abs(x))", lambda x, y, a, b: np.abs(x).astype(np.int32)),
    ("int32(-x)", lambda x, y, a, b: (-x).astype(np.int32)),
    ("int32(x - y < x)", lambda x, y, a, b: ((x - y) < x).astype(np.int32)),
    ("int32(a * b)", lambda x, y, a, b: (a * b).astype(np.int32)),
    ("int32((a + b) // 3)", lambda x, y, a, b: ((a + b) // np.int16(3)).astype(np.int32)),
    ("int32(a << 4)", lambda x, y, a, b: (a << np.int16(4)).astype(np.int32)),
]


def signed_kernel(n):
    @T.prim_func
    def signed_wraps(X: T.Tensor((n,), T.int8), Y: T.Tensor((n,), T.int8), A: T.Tensor((n,), T.int16),
                     B: T.Tensor((n,), T.int16), W: T.Tensor((n, len(SIGNED_COLUMNS)), T.int32)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for k in T.Parallel(BLOCK):
                if bx * BLOCK + k < n:
                    i = bx * BLOCK + k
                    x, y, a, b = X[i], Y[i], A[i], B[i]
                    W[i, 0] = T.Cast("int32", x + y)
                    W[i, 1] = T.Cast("int32", (x * y) >> T.int8(1))
                    W[i, 2] = T.Cast("int32", T.abs(x))
                    W[i, 3] = T.Cast("int32", -x)
                    W[i, 4] = T.if_then_else(x - y < x, 1, 0)
                    W[i, 5] = T.Cast("int32", a * b)
                    W[i, 6] = T.Cast("int32", (a + b) // T.int16(3))
                    W[i, 7] = T.Cast("int32", a << T.int16(4))

    return signed_wraps


@pytest.mark.parametrize("size", ["static", "dynamic"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_int8_and_int16_arithmetic_wraps_like_numpy(backend, target, size):
    kernel = tilelang.compile(signed_kernel(N if size == "static" else T.dynamic("n")), target=target,
                              execution_backend=backend)
    rng = np.random.default_rng(7)
    x, y = rng.integers(-128, 128, N, dtype=np.int8), rng.integers(-128, 128, N, dtype=np.int8)
    a, b = rng.integers(-(1 << 15), 1 << 15, N, dtype=np.int16), rng.integers(-(1 << 15), 1 << 15, N, dtype=np.int16)
    x[:5], y[:5] = [100, -128, 127, -100, -128], [100, 1, 1, -100, -1]
    a[:4], b[:4] = [30000, -32768, 32767, 300], [30000, -1, 1, 300]
    w = torch.zeros((N, len(SIGNED_COLUMNS)), dtype=torch.int32)
    kernel(*(torch.from_numpy(t) for t in (x, y, a, b)), w)
    with np.errstate(over="ignore"):
        for column, (text, ref) in enumerate(SIGNED_COLUMNS):
            assert w[:, column].tolist() == ref(x, y, a, b).tolist(), (text, backend, target, size)


@T.prim_func
def bool_arithmetic(A: T.Tensor((4,), "bool"), B: T.Tensor((4,), "bool"), O: T.Tensor((5, 4), "int32")):
    with T.Kernel(1, threads=4):
        for i in T.Parallel(4):
            O[0, i] = A[i] + B[i]
            O[1, i] = (A[i] + B[i]) * 3
            O[2, i] = T.if_then_else(A[i] + B[i] == B[i], 1, 0)
            O[3, i] = A[i] * B[i] + A[i]
            O[4, i] = T.Cast("int32", ~A[i])


def _bool_expected(a, b):
    s = a | b  # torch: bool + bool is True where either is
    return [s.int().tolist(), (s.int() * 3).tolist(), (s == b).int().tolist(), ((a & b) | a).int().tolist(),
            (~a).int().tolist()]


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_bool_arithmetic_gives_bools_on_every_path(backend, target):
    """C promotes a bool to int: True + True was 2 on C (and ~True was -2, true) and 1 on llvm."""
    kernel = tilelang.compile(bool_arithmetic, target=target, execution_backend=backend)
    a, b = torch.tensor([True, True, False, False]), torch.tensor([True, False, True, False])
    out = torch.zeros(5, 4, dtype=torch.int32)
    kernel(a, b, out)
    assert out.tolist() == _bool_expected(a, b)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_bool_arithmetic_in_the_cuda_source_is_logical_and_compiles():
    kernel = tilelang.compile(bool_arithmetic, target="cuda", execution_backend="cython")
    source = kernel.get_kernel_source()
    assert "(A_ptr[((int)threadIdx.x)] || B_ptr[((int)threadIdx.x)])" in source, source
    assert "= ((int)!A_ptr[((int)threadIdx.x)]);" in source, source
