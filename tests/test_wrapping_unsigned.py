"""uint32 arithmetic wraps around on every CPU path (lowering/wrapping_unsigned.py).

TVM 0.27's LLVM code generator marks 32/64-bit unsigned ``+ - *`` as never wrapping (LLVM's
``nuw``), so LLVM folded overflow checks and wrapping sums: on target ``llvm`` these kernels gave
other values than NumPy and target ``c`` without an error. Each kernel here runs with cython/c,
tvm_ffi/c and tvm_ffi/llvm and is compared with NumPy's wrapping uint32 arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering.wrapping_unsigned import wrapping_uint32_arithmetic

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
def test_wrapping_uint32_arithmetic_matches_numpy(backend, target):
    kernel = tilelang.compile(_kernel(), target=target, execution_backend=backend)
    x = (np.arange(N, dtype=np.uint32) * np.uint32(977)) ^ np.uint32(0xFFFF0000)
    x[:4] = [0, 1, 6, 0xFFFFFFFF]
    y = torch.zeros((N, COLUMNS), dtype=torch.uint32)
    with np.errstate(over="ignore"):
        want = _expected(x)
    kernel(torch.from_numpy(x), y)
    for column in range(COLUMNS):
        assert y[:, column].numpy().tolist() == want[:, column].tolist(), (column, backend, target)


def test_only_uint32_operations_are_widened():
    import tvm
    from tvm import tirx

    a, b = tirx.Var("a", "uint32"), tirx.Var("b", "uint32")
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    body = tirx.Evaluate(tirx.Add(a, b) + tirx.Cast("uint32", tirx.Add(i, j)))
    func = tirx.PrimFunc([a, b, i, j], body)
    mod = wrapping_uint32_arithmetic(tvm.IRModule({"f": func}))
    text = mod["f"].script()
    assert 'T.Cast("uint64", a) + T.Cast("uint64", b)' in text
    assert "i + j" in text
