"""Real kernels: the kernel language, real TVM lowering to C, built and run by the cython backend."""

from __future__ import annotations

import pytest
import torch

lowering = pytest.importorskip("tilelang_core.lowering", reason="the lowering pipeline is not in this checkout")
try:
    import tilelang.language as T
except ImportError:  # the facade may lag behind the core
    import tilelang_core.language as T

from tilelang_core.artifact import BuildOptions  # noqa: E402

from tilelang_backend_cython import plugin  # noqa: E402


def vector_add(N, block=128, dtype="float32"):
    @T.prim_func
    def vadd(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return vadd


def matmul(M, N, K, block_M=32, block_N=32, block_K=16):
    @T.prim_func
    def mm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            acc = T.alloc_fragment((block_M, block_N), "float32")
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.float32(0)
            for ko in T.serial(T.ceildiv(K, block_K)):
                for kk in T.serial(block_K):
                    for i, j in T.Parallel(block_M, block_N):
                        if by * block_M + i < M and bx * block_N + j < N and ko * block_K + kk < K:
                            acc[i, j] = acc[i, j] + A[by * block_M + i, ko * block_K + kk] * B[ko * block_K + kk, bx * block_N + j]
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M and bx * block_N + j < N:
                    C[by * block_M + i, bx * block_N + j] = acc[i, j]

    return mm


def row_scale(M, N=64, block_M=16):
    @T.prim_func
    def rs(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = X[bx * block_M + i, j] * S[bx * block_M + i]

    return rs


def build(func, out_idx=(), pass_configs=None):
    art = lowering.lower(func, target="c", pass_configs=pass_configs, consumes=["device_source"])
    return plugin.tilelang_backend_build(art, BuildOptions(out_idx=list(out_idx), pass_configs=pass_configs or {}))


def test_vector_add_static_in_place_and_out_idx():
    k = build(vector_add(4096))
    a, b, c = torch.randn(4096), torch.randn(4096), torch.empty(4096)
    k(a, b, c)
    torch.testing.assert_close(c, a + b)
    k2 = build(vector_add(4096), out_idx=[2])
    torch.testing.assert_close(k2(a, b), a + b)
    with pytest.raises(ValueError, match=r"^vadd\(\) argument 'B' \(#1\): expected shape\[0\] == 4096, got 4095$"):
        k2(a, torch.randn(4095))


@pytest.mark.parametrize("n", [1, 127, 1000, 70_000])
def test_vector_add_dynamic(n):
    k = build(vector_add(T.dynamic("n")), out_idx=[2])
    a, b = torch.randn(n), torch.randn(n)
    torch.testing.assert_close(k(a, b), a + b)


def test_vector_add_dynamic_symbol_clash():
    k = build(vector_add(T.dynamic("n")))
    with pytest.raises(ValueError, match=r"^vadd\(\) argument 'B' \(#1\): shape\[0\] binds symbol 'n' = 7, but argument 'A' bound it to 8$"):
        k(torch.zeros(8), torch.zeros(7), torch.zeros(8))


def test_vector_add_float16():
    k = build(vector_add(256, dtype="float16"), out_idx=[2])
    a, b = torch.randn(256).half(), torch.randn(256).half()
    torch.testing.assert_close(k(a, b), a + b)


@pytest.mark.parametrize("shape", [(64, 64, 64), (100, 70, 50)])
def test_blocked_matmul(shape):
    m, n, kk = shape
    k = build(matmul(m, n, kk), out_idx=[2])
    a, b = torch.randn(m, kk), torch.randn(kk, n)
    torch.testing.assert_close(k(a, b), a @ b, rtol=1e-4, atol=1e-3)


def test_row_scale_dynamic_rows_without_parallel_blocks():
    k = build(row_scale(T.dynamic("m")), out_idx=[2], pass_configs={"tl.disable_parallel_blocks": True})
    x, s = torch.randn(333, 64), torch.randn(333)
    torch.testing.assert_close(k(x, s), x * s[:, None])
    with pytest.raises(ValueError, match=r"^rs\(\) argument 'X' \(#0\): expected shape\[1\] == 64, got 63$"):
        k(torch.randn(5, 63), torch.randn(5))


def test_tilelang_compile_selects_cython_for_c(tmp_path, monkeypatch):
    import tilelang

    if not hasattr(tilelang, "compile"):
        pytest.skip("tilelang.compile is not in this checkout")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    k = tilelang.compile(vector_add(T.dynamic("n")), target="c", execution_backend="cython", out_idx=[2])
    a = torch.randn(300)
    torch.testing.assert_close(k(a, a), a + a)
    with pytest.raises(TypeError, match=r"^vadd\(\) takes 2 tensor/scalar arguments \(A, B\), got 1$"):
        k(a)


needs_nvcc = pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc is not on PATH")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs a CUDA device: torch.cuda.is_available() is False on this machine")


def _cuda_build(func, out_idx=()):
    art = lowering.lower(func, target="cuda -arch=sm_90", consumes=["device_source"])
    return art, plugin.tilelang_backend_build(art, BuildOptions(out_idx=list(out_idx)))


@needs_nvcc
@pytest.mark.parametrize("which", ["vector_add_dynamic", "matmul_fragment"])
def test_cuda_lowered_kernels_compile_with_exported_launcher(which, monkeypatch):
    import subprocess

    monkeypatch.setenv("TILELANG_CYTHON_KEEP_BUILD", "1")  # inspect the library and source files

    func = vector_add(T.dynamic("n")) if which == "vector_add_dynamic" else matmul(128, 128, 64)
    art, k = _cuda_build(func, out_idx=[2])
    lib = k.meta["library"]
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    symbols = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert {"__tl_cy_call", "__tl_cy_error_string"} <= symbols
    kernel_syms = subprocess.run(["nm", lib], capture_output=True, text=True, check=True).stdout
    assert art.device_kernels[0].name in kernel_syms  # the __global__ stub is in the library
    assert "cudaLaunchKernel" in kernel_syms or "<<<" not in open(k.meta["source"]).read()


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("n", [1, 1000, 100_000])
def test_cuda_lowered_vector_add_runs(n):
    art = lowering.lower(vector_add(T.dynamic("n")), target="cuda", consumes=["device_source"])
    k = plugin.tilelang_backend_build(art, BuildOptions(out_idx=[2]))
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    torch.testing.assert_close(k(a, b), a + b)


@pytest.mark.gpu
@needs_gpu
def test_cuda_lowered_matmul_runs():
    art = lowering.lower(matmul(128, 96, 64), target="cuda", consumes=["device_source"])
    k = plugin.tilelang_backend_build(art, BuildOptions(out_idx=[2]))
    a, b = torch.randn(128, 64, device="cuda"), torch.randn(64, 96, device="cuda")
    torch.testing.assert_close(k(a, b), a @ b, rtol=1e-4, atol=1e-3)
