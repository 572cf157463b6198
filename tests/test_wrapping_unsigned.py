"""uint32 and uint64 arithmetic wraps around on every CPU path (lowering/wrapping_unsigned.py).

TVM 0.27's LLVM code generator marks 32/64-bit unsigned ``+ - *`` as never wrapping (LLVM's
``nuw``), so LLVM folded overflow checks and wrapping sums: on target ``llvm`` these kernels gave
other values than NumPy and target ``c`` without an error. Each kernel here runs with cython/c,
tvm_ffi/c and tvm_ffi/llvm and is compared with NumPy's wrapping arithmetic; the uint64 kernel
also in a ``T.vectorized`` loop (vector operands).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering.wrapping_unsigned import wrapping_unsigned_arithmetic

N = 64
COLUMNS = 6


def _kernel():
    @T.prim_func
    def wraps(X: T.Tensor((N,), T.uint32), Y: T.Tensor((N, COLUMNS), T.uint32)):
        with T.Kernel(1, threads=N):
            for i in T.Parallel(N):
                y = X[(i + 1) % N]
                Y[i, 0] = X[i] * T.uint32(2654435761) + T.uint32(0x9E3779B9)
                Y[i, 1] = (X[i] + T.uint32(0xFFFFFFF0)) // T.uint32(16)
                Y[i, 2] = T.if_then_else(X[i] + T.uint32(0xFFFFFFF0) < X[i], T.uint32(1), T.uint32(0))
                Y[i, 3] = y - (y + X[i])
                Y[i, 4] = (X[i] - T.uint32(7)) >> 1
                Y[i, 5] = (X[i] ^ (X[i] >> 16)) * T.uint32(0x45D9F3B)

    return wraps


def _expected(x: np.ndarray) -> np.ndarray:
    y = np.roll(x, -1)
    u = np.uint32
    return np.stack([
        x * u(2654435761) + u(0x9E3779B9),
        (x + u(0xFFFFFFF0)) // u(16),
        ((x + u(0xFFFFFFF0)) < x).astype(np.uint32),
        y - (y + x),
        (x - u(7)) >> u(1),
        (x ^ (x >> u(16))) * u(0x45D9F3B),
    ], axis=1)


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_wrapping_unsigned_arithmetic_matches_numpy(backend, target):
    kernel = tilelang.compile(_kernel(), target=target, execution_backend=backend)
    x = (np.arange(N, dtype=np.uint32) * np.uint32(977)) ^ np.uint32(0xFFFF0000)
    x[:4] = [0, 1, 6, 0xFFFFFFFF]
    y = torch.zeros((N, COLUMNS), dtype=torch.uint32)
    with np.errstate(over="ignore"):
        want = _expected(x)
    kernel(torch.from_numpy(x), y)
    for column in range(COLUMNS):
        assert y[:, column].numpy().tolist() == want[:, column].tolist(), (column, backend, target)


def _kernel64(vectorized: bool):
    @T.prim_func
    def wraps64(X: T.Tensor((N,), T.uint64), Y: T.Tensor((N, COLUMNS), T.uint64)):
        with T.Kernel(1, threads=N):
            for j in T.serial(N // 4):
                for k in T.vectorized(4) if vectorized else T.serial(4):
                    Y[j * 4 + k, 0] = X[j * 4 + k] * T.uint64(0x9E3779B97F4A7C15) + T.uint64(0xBF58476D1CE4E5B9)
                    Y[j * 4 + k, 1] = (X[j * 4 + k] + T.uint64(0xFFFFFFFFFFFFFFF0)) // T.uint64(16)
                    Y[j * 4 + k, 2] = T.if_then_else(X[j * 4 + k] + T.uint64(0xFFFFFFFFFFFFFFF0) < X[j * 4 + k],
                                                     T.uint64(1), T.uint64(0))
                    Y[j * 4 + k, 3] = X[(j * 4 + k + 1) % N] - (X[(j * 4 + k + 1) % N] + X[j * 4 + k])
                    Y[j * 4 + k, 4] = (X[j * 4 + k] - T.uint64(7)) >> T.uint64(1)
                    Y[j * 4 + k, 5] = (X[j * 4 + k] ^ (X[j * 4 + k] >> T.uint64(31))) * X[(j * 4 + k + 3) % N]

    return wraps64


def _expected64(x: np.ndarray) -> np.ndarray:
    u = np.uint64
    y, z = np.roll(x, -1), np.roll(x, -3)
    return np.stack([
        x * u(0x9E3779B97F4A7C15) + u(0xBF58476D1CE4E5B9),
        (x + u(0xFFFFFFFFFFFFFFF0)) // u(16),
        ((x + u(0xFFFFFFFFFFFFFFF0)) < x).astype(np.uint64),
        y - (y + x),
        (x - u(7)) >> u(1),
        (x ^ (x >> u(31))) * z,
    ], axis=1)


@pytest.mark.parametrize("vectorized", [False, True], ids=["scalar", "vectorized"])
@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_wrapping_uint64_arithmetic_matches_numpy(backend, target, vectorized):
    kernel = tilelang.compile(_kernel64(vectorized), target=target, execution_backend=backend)
    x = (np.arange(N, dtype=np.uint64) * np.uint64(0x1000000000977)) ^ np.uint64(0xFFFF000000000000)
    x[:5] = [0, 1, 6, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF]
    y = torch.zeros((N, COLUMNS), dtype=torch.uint64)
    with np.errstate(over="ignore"):
        want = _expected64(x)
    kernel(torch.from_numpy(x), y)
    for column in range(COLUMNS):
        assert y[:, column].numpy().tolist() == want[:, column].tolist(), (column, backend, target)


def test_only_unsigned_32_and_64_bit_operations_are_rewritten():
    import tvm
    from tvm import tirx

    a, b = tirx.Var("a", "uint32"), tirx.Var("b", "uint32")
    c, d = tirx.Var("c", "uint64"), tirx.Var("d", "uint64")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    body = tirx.Evaluate(tirx.Add(a, b) + tirx.Cast("uint32", tirx.Add(i, j)) + tirx.Cast("uint32", tirx.Add(c, d)))
    func = tirx.PrimFunc([a, b, c, d, i, j], body)
    mod = wrapping_unsigned_arithmetic(tvm.IRModule({"f": func}))
    text = mod["f"].script()
    assert 'T.Cast("uint64", a) + T.Cast("uint64", b)' in text
    assert "i + j" in text
    assert "T.Select(d <= c ^ T.uint64(18446744073709551615), c + d, " in text, text
