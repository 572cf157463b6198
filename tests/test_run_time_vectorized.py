"""``T.vectorized(n)`` of a size known only at run time (lowering/vector_lanes.py ``RunTimeVectorsSerial``).

Before: it ran on the C target (its vectorized loops are serial under ``#pragma omp simd``), but
llvm and CUDA stopped lowering with TVM's "Failed to vectorize loop with extent n" (TVM's
vectorizer needs a constant lane count unless the target has scalable vectors). Now such a loop
runs its lanes one after another on every target; loops of a constant extent are vectorized as
before."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_run_time_vectorized")

n = T.dynamic("n")


@T.prim_func
def scaled(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.vectorized(n):
            B[i] = A[i] * 2.0 + 1.0


@T.prim_func
def scaled_rows(A: T.Tensor((n, 8), "float32"), B: T.Tensor((n, 8), "float32")):
    with T.Kernel(n, threads=1) as bx:
        for j in T.vectorized(8):  # a constant extent: still one vector
            B[bx, j] = A[bx, j] * 2.0 + 1.0


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_run_time_extent_runs_on_every_cpu_path(backend, target):
    kernel = tilelang.compile(scaled, target=target, execution_backend=backend)
    for size in (1, 7, 33):
        a = torch.randn(size)
        b = torch.full((size,), float("nan"))
        kernel(a, b)
        torch.testing.assert_close(b, a * 2.0 + 1.0, rtol=0, atol=0)


def test_cuda_lowers_a_serial_loop_and_keeps_constant_vectors():
    src = lower(scaled, target="cuda -arch=sm_80").device_source
    assert "for (int i = 0; i < n; ++i)" in src, src
    rows = lower(scaled_rows, target="cuda -arch=sm_80").device_source
    assert "float4" in rows, rows


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_compiles_with_nvcc(tmp_path):
    cu = tmp_path / "scaled.cu"
    cu.write_text(lower(scaled, target="cuda -arch=sm_80").device_source)
    cmd = [CU.NVCC, "-c", "-arch=sm_80", "-diag-suppress=177", "-o", str(tmp_path / "scaled.o"), str(cu)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
