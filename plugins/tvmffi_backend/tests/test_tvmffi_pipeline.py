"""The tvm_ffi backend fed by the real pipeline: ``tilelang_core.lowering.lower(..., consumes=
["runtime_module"])`` and ``tilelang.compile(..., execution_backend="tvm_ffi")``."""

from __future__ import annotations

import json

import pytest
import torch
from _tvmffi_helpers import run_python

lowering = pytest.importorskip("tilelang_core.lowering", reason="the lowering pipeline is not available")
T = pytest.importorskip("tilelang.language")

from tilelang_core.artifact import BuildOptions  # noqa: E402
from tilelang_core.errors import BackendUnavailableError  # noqa: E402
from tilelang_backend_tvmffi import plugin  # noqa: E402


def vector_add(N, block=128, dtype="float32"):
    @T.prim_func
    def vadd(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return vadd


def row_scale(M, N=64, block_M=16, dtype="float32"):
    @T.prim_func
    def rscale(X: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    Y[bx * block_M + i, j] = X[bx * block_M + i, j] * S[bx * block_M + i]

    return rscale


def _build(func, target, out_idx=()):
    artifact = lowering.lower(func, target=target, consumes=["runtime_module"])
    assert artifact.tvm_modules is not None
    return plugin.tilelang_backend_build(artifact=artifact, options=BuildOptions(out_idx=list(out_idx)))


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("n", [4096, "dynamic"])
def test_lowered_vector_add(target, n):
    k = _build(vector_add(T.dynamic("n") if n == "dynamic" else n), target, out_idx=[2])
    length = 1000 if n == "dynamic" else n
    a, b = torch.randn(length), torch.randn(length)
    torch.testing.assert_close(k(a, b), a + b)


def test_lowered_dynamic_rows_and_bad_calls():
    k = _build(row_scale(T.dynamic("m")), "llvm", out_idx=[2])
    x, s = torch.randn(333, 64), torch.randn(333)
    torch.testing.assert_close(k(x, s), x * s[:, None])
    with pytest.raises(ValueError) as info:
        k(x, torch.randn(332))
    assert str(info.value) == "rscale() argument 'S' (#1): shape[0] binds symbol 'm' = 332, but argument 'X' bound it to 333"
    with pytest.raises(ValueError) as info:
        k(torch.randn(333, 63), s)
    assert str(info.value) == "rscale() argument 'X' (#0): expected shape[1] == 64, got 63"


def test_lowered_llvm_kernel_with_misaligned_views():
    k = _build(vector_add(T.dynamic("n")), "llvm")
    buf = torch.randn(3 * 1000 + 3)
    a, b, c = buf[1:1001], buf[1001:2001], torch.zeros(1001)[1:]
    k(a, b, c)
    torch.testing.assert_close(c, a + b)


def test_tilelang_compile_export_and_load_in_a_fresh_process(tmp_path):
    import tilelang

    kernel = tilelang.compile(row_scale(T.dynamic("m")), out_idx=-1, execution_backend="tvm_ffi", target="llvm")
    assert kernel.backend.name == "tvm_ffi"
    x, s = torch.randn(40, 64), torch.randn(40)
    torch.testing.assert_close(kernel(x, s), x * s[:, None])
    path = kernel.export(tmp_path / "rscale")
    proc = run_python(
        f"""
        import sys, torch, tilelang
        k = tilelang.load({json.dumps(str(path))})
        x, s = torch.randn(7, 64), torch.randn(7)
        torch.testing.assert_close(k(x, s), x * s[:, None])
        print("OK", k.backend.name, "tvm" in sys.modules)
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("OK tvm_ffi")


def test_compiler_variables_holding_flags_build_and_export(tmp_path):
    """``CC``/``CXX`` with flags (``CC="cc -g0"``, as build scripts set them) build, export and
    reload target-c and llvm kernels. TVM's own export_library ran each as one program name
    ("No such file or directory: 'cc -g0'")."""
    proc = run_python(
        f"""
        import torch, tilelang, tilelang.language as T

        @T.prim_func
        def double(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    B[i] = A[i] * 2

        a = torch.randn(64)
        for target in ("c", "llvm"):
            kernel = tilelang.compile(double, target=target, execution_backend="tvm_ffi")
            b = torch.empty(64)
            kernel(a, b)
            torch.testing.assert_close(b, a * 2)
            path = {json.dumps(str(tmp_path))} + "/" + target
            kernel.export(path)
            b = torch.empty(64)
            tilelang.load(path)(a, b)
            torch.testing.assert_close(b, a * 2)
        print("OK")
        """,
        env={"CC": "cc -g0", "CXX": "c++ -g0", "TILELANG_DISABLE_CACHE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "OK"


def test_lowered_cuda_module_is_built_but_not_runnable_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: see the gpu-marked launch tests")
    artifact = lowering.lower(vector_add(T.dynamic("n")), target="cuda -arch=sm_80", consumes=["runtime_module"])
    import tvm

    if tvm.runtime.enabled("cuda"):
        pytest.skip("TVM's CUDA runtime is loaded")
    kernel = plugin.tilelang_backend_build(artifact=artifact, options=BuildOptions(out_idx=[2]))
    with pytest.raises(BackendUnavailableError, match="'cuda' device module cannot run here"):
        kernel(torch.zeros(8), torch.zeros(8))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False")
def test_gpu_lowered_vector_add_through_tilelang_compile():
    import tilelang

    k = tilelang.compile(vector_add(T.dynamic("n")), out_idx=-1, execution_backend="tvm_ffi", target="cuda")
    a, b = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    torch.testing.assert_close(k(a, b), a + b)


def test_cuda_builds_here_and_exports_without_a_gpu(tmp_path, monkeypatch):
    """Build here, run elsewhere: named explicitly, tvm_ffi builds CUDA kernels without TVM's CUDA runtime."""
    import tvm

    if tvm.runtime.enabled("cuda") or torch.cuda.is_available():
        pytest.skip("TVM's CUDA runtime is loaded: see the gpu-marked tests")
    import tilelang

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(vector_add(T.dynamic("n")), out_idx=-1, execution_backend="tvm_ffi",
                              target="cuda -arch=sm_80")
    assert kernel.cannot_run
    with pytest.raises(BackendUnavailableError, match="cannot run on this machine.*export the kernel"):
        kernel(torch.zeros(8), torch.zeros(8))
    assert (kernel.export(tmp_path / "k") / "backend" / "kernel.so").stat().st_size > 0
