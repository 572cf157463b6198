"""CUDA target: the device source plus the generated host launcher, compiled by nvcc.

Without a GPU the library is compiled and its exported symbols checked (nm); launching is
covered by the tests marked `gpu`, skipped when torch.cuda.is_available() is False.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import torch

import kernels as K

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs a CUDA device: torch.cuda.is_available() is False on this machine")


def _exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_launcher_source_sets_smem_once_and_uses_stream():
    from tilelang_core.artifact import BuildOptions

    from tilelang_backend_cython.codegen import cuda_source
    from tilelang_backend_cython.plan import make_plan

    art = K.cuda_vadd()
    src = cuda_source(art, make_plan(art, BuildOptions()))
    assert "cudaFuncSetAttribute((const void *)vadd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize" in src
    assert "if (smem > 48 * 1024 && smem > __tl_cy_smem_0[dev])" in src  # raised only when a launch needs more than allowed so far
    assert "__tl_cy_floordiv((((long long)__tl_cy_s[0]) + 127LL), 128LL)" in src
    assert "(size_t)smem, st>>>" in src


@needs_nvcc
def test_nvcc_builds_library_with_exported_entry_points(tmp_path):
    from tilelang_core.artifact import BuildOptions

    from tilelang_backend_cython import codegen, compiler
    from tilelang_backend_cython.plan import make_plan

    art = K.cuda_vadd()
    plan = make_plan(art, BuildOptions())
    built = compiler.compile_cuda(art.name, codegen.cuda_source(art, plan), target=art.target)
    try:
        symbols = _exported(built.path)
    finally:
        built.release()
    assert {"__tl_cy_call", "__tl_cy_error_string"} <= symbols
    assert "__tl_cy_call" in built.source and built.data and not built.directory.exists()


@needs_nvcc
def test_nvcc_error_carries_command_line():
    from tilelang_core.errors import BuildError

    art = K.cuda_vadd()
    art = art.replace(device_source=art.device_source.replace("scratch[threadIdx.x] =", "undeclared ="))
    with pytest.raises(BuildError) as info:
        K.build(art)
    msg = str(info.value)
    assert "target cuda" in msg and "nvcc" in msg and "-arch=sm_80" in msg and "undeclared" in msg


@needs_nvcc
def test_cuda_build_hook_returns_kernel_that_validates_on_cpu_machine():
    """Built through the hook; without a GPU a call with CPU tensors must fail on the device check."""
    k = K.build(K.cuda_vadd(), out_idx=[2])
    assert k.meta["plan"]["device"] == "cuda"
    a = torch.zeros(10)
    with pytest.raises(ValueError, match=r"^vadd_cuda\(\) argument 'A' \(#0\): expected a tensor on cuda, got cpu$"):
        k(a, a)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("n", [1, 127, 128, 100_000])
def test_cuda_launch_matches_torch(n):
    k = K.build(K.cuda_vadd(arch=""), out_idx=[2])
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    torch.testing.assert_close(k(a, b), a + b)


@pytest.mark.gpu
@needs_gpu
def test_cuda_launch_on_given_stream_and_graph_capture():
    k = K.build(K.cuda_vadd(arch=""))
    a, b, c = (torch.randn(4096, device="cuda") for _ in range(3))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        k(a, b, c)  # torch's current stream
    k(a, b, c, stream=s)
    k(a, b, c, stream=s.cuda_stream)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    g = torch.cuda.CUDAGraph()
    c.zero_()
    with torch.cuda.graph(g):
        k(a, b, c)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)


@needs_nvcc
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a CUDA driver")
def test_cuda_builds_here_and_exports_without_a_driver(tmp_path, monkeypatch):
    """Build here, run elsewhere: named explicitly, the cython CUDA path builds with nvcc alone."""
    import tilelang
    import tilelang.language as T
    from tilelang_core.errors import BackendUnavailableError

    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(main, out_idx=-1, execution_backend="cython", target="cuda -arch=sm_80")
    assert kernel.cannot_run.startswith("no CUDA driver on this machine")
    with pytest.raises(BackendUnavailableError, match="no CUDA driver on this machine.*export the kernel"):
        kernel(torch.zeros(256))
    assert (kernel.export(tmp_path / "k") / "backend" / "kernel.so").is_file()
    # loaded back here, it refuses calls the same way (it said "expected a tensor on cuda, got cpu"),
    # and it can be exported again
    os.chmod(tmp_path, 0o755)
    loaded = tilelang.load(tmp_path / "k")
    with pytest.raises(BackendUnavailableError, match=r"main\(\) cannot run on this machine: no CUDA driver on this "
                                                      r"machine .*load this export on a machine with an NVIDIA GPU"):
        loaded(torch.zeros(256))
    assert (loaded.export(tmp_path / "again") / "backend" / "kernel.so").is_file()


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_100a", "sm_103a"])
def test_stochastic_rounding_casts_build_for_their_architectures(arch, monkeypatch, tmp_path):
    """``T.cast(..., round="rs")`` uses instructions of sm_100a/sm_103a only: ``nvcc -arch=sm_100a``
    also assembled the portable compute_100 PTX and failed ("Feature '.rs' not supported on
    .target 'sm_100'"), so the kernel never built with this backend. Built here without a GPU."""
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def rs_cast(A: T.Tensor((64,), "float32"), R: T.Tensor((64,), "uint32"), B: T.Tensor((64,), "bfloat16")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = T.cast(A[i], "bfloat16", round="rs", sat=True, rbits=R[i])

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    kernel = tilelang.compile(rs_cast, target=f"cuda -arch={arch}", execution_backend="cython")
    assert "cvt.rs" in kernel.get_kernel_source()
