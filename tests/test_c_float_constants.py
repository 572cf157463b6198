"""Float constants in C and CUDA sources are exact (lowering/c_constants.py).

TVM 0.27 prints float constants in C with seven significant digits: ``X[i] / 3.0000000000000004``
(float64) ran as ``X[i] / 3.0`` and ``Z[i] * 1.0000001`` (float32) as ``Z[i] * 1.0``. The kernels
here multiply by constants that need 17 (float64) and 9 (float32) digits, over several blocks
(so the C entry also has outlined block functions), on every CPU backend, and must equal torch's
results bit for bit. TVM's CUDA sources printed float64 constants in fixed point with 15
decimals (``1e-300`` as ``0.000000000000000``); those are checked as bit patterns, and the
source is compiled with nvcc (no GPU here to run it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import math
import os
import shutil

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering.c_constants import printed_exactly

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvrtc_toolchain import nvrtc_available  # noqa: E402

N = 64
NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)
F64 = (3.0000000000000004, 1.0 / 3.0, math.pi, 0.1, 1e-300, -2.0 / 7.0)
F32 = (1.0000001, 1.0 / 3.0, math.e, 0.5, 16777216.0 + 2.0, -1.0 / 7.0)


def _kernel():
    a, b, c, d, e, f = F64
    p, q, r, s, t, u = F32

    @T.prim_func
    def scaled(X: T.Tensor((N,), T.float64), Y: T.Tensor((6, N), T.float64),
               Z: T.Tensor((N,), T.float32), W: T.Tensor((6, N), T.float32)):
        with T.Kernel(4, threads=N // 4) as bx:
            for k in T.Parallel(N // 4):
                i = bx * (N // 4) + k
                Y[0, i] = X[i] * a
                Y[1, i] = X[i] * b
                Y[2, i] = X[i] * c
                Y[3, i] = X[i] * d
                Y[4, i] = X[i] * e
                Y[5, i] = X[i] * f
                W[0, i] = Z[i] * p
                W[1, i] = Z[i] * q
                W[2, i] = Z[i] * r
                W[3, i] = Z[i] * s
                W[4, i] = Z[i] * t
                W[5, i] = Z[i] * u

    return scaled


def test_the_constants_chosen_are_ones_seven_digits_cannot_hold():
    assert not printed_exactly(F64[0], "float64") and not printed_exactly(F64[1], "float64")
    assert not printed_exactly(F32[0], "float32") and not printed_exactly(F32[1], "float32")
    assert printed_exactly(0.1, "float64") and printed_exactly(0.5, "float32")


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_products_with_constants_equal_torch_bit_for_bit(backend, target):
    kernel = tilelang.compile(_kernel(), target=target, execution_backend=backend)
    x = torch.randn(N, dtype=torch.float64, generator=torch.Generator().manual_seed(11))
    z = x.to(torch.float32)
    y = torch.zeros((6, N), dtype=torch.float64)
    w = torch.zeros((6, N), dtype=torch.float32)
    kernel(x, y, z, w)
    for row, constant in enumerate(F64):
        assert torch.equal(y[row], x * constant), (row, constant)
    for row, constant in enumerate(F32):
        want = z * torch.tensor(constant, dtype=torch.float32)
        assert torch.equal(w[row], want), (row, constant)


def test_the_c_source_holds_exact_helpers_and_leaves_exact_constants_alone():
    source = tilelang.lower(_kernel(), target="c").kernel_source
    bits = int(np.float64(3.0000000000000004).view(np.uint64))
    assert f"tl_f64_{bits:016x}()" in source
    assert "return 3.0000000000000004e+00;" in source
    assert "return 1.0000001e+00f;" in source
    assert "3.000000e+00" not in source and "1.000000e+00f" not in source
    assert "1.000000e-01" in source  # 0.1 prints exactly: no helper


CUDA_F64 = (1e-300, 1.0 / 3.0, 3.0000000000000004, 1.2345e-14, 2.2250738585072014e-308, 0.5)


def _cuda_kernel():
    a, b, c, d, e, f = CUDA_F64

    @T.prim_func
    def small(X: T.Tensor((N,), T.float64), Y: T.Tensor((6, N), T.float64)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                Y[0, i] = X[i] * a
                Y[1, i] = X[i] * b
                Y[2, i] = X[i] * c
                Y[3, i] = T.max(X[i], d)
                Y[4, i] = X[i] + e
                Y[5, i] = X[i] * f

    return small


def test_cuda_float64_constants_are_exact_bit_patterns():
    source = tilelang.lower(_cuda_kernel(), target="cuda").kernel_source
    assert "0.000000000000000)" not in source  # TVM's fixed-point printing of 1e-300 and 1.2345e-14
    for value in CUDA_F64[:5]:
        bits = int(np.float64(value).view(np.int64))
        assert f"__longlong_as_double((int64_t){bits})" in source, (value, source)
    assert "0.500000000000000" in source  # printed exactly by TVM: left alone


@pytest.mark.parametrize("backend", [
    pytest.param("cython", marks=pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")),
    pytest.param("nvrtc", marks=pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")),
])
def test_the_cuda_source_compiles(backend):
    kernel = tilelang.compile(_cuda_kernel(), target="cuda", execution_backend=backend)
    assert "__longlong_as_double" in kernel.get_kernel_source()
