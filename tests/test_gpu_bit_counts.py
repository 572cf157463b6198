"""``T.popcount`` / ``T.clz`` of every integer width on the GPU targets (lowering/bit_counts.py).

TVM 0.27's CUDA rules count only uint32/uint64 (``popcount``) and 32/64-bit values (``clz``), and
its Metal rule for ``clz`` only 32/64-bit values; the rest failed to lower. No GPU runs here, so:
the sources are checked for the CUDA and Metal calls and compiled with nvcc and NVRTC, and the
rewritten expressions themselves (the zero extension and the ``clz`` offset) are run on this CPU
through TVM's LLVM backend. The same kernel runs on a CUDA device where there is one.
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
from tilelang_core.lowering.bit_counts import lower_gpu_bit_counts

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvrtc_toolchain import nvrtc_available  # noqa: E402

N = 64
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


def counts(dtype):
    """Y[0] = popcount(X), Y[1] = clz(X), in X's dtype."""

    @T.prim_func
    def bit_counts(X: T.Tensor((N,), dtype), Y: T.Tensor((2, N), dtype)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                Y[0, i] = T.popcount(X[i])
                Y[1, i] = T.clz(X[i])

    return bit_counts


def values(dtype):
    info = np.iinfo(dtype)
    v = np.random.default_rng(11).integers(info.min, info.max, size=N, dtype=dtype, endpoint=True)
    v[:5] = [0, 1, info.max, info.min, info.max // 2 + 1]
    return v


def python_counts(v, dtype):
    bits = np.iinfo(dtype).bits
    masked = [int(x) & ((1 << bits) - 1) for x in v]
    return [bin(m).count("1") for m in masked], [bits - m.bit_length() for m in masked]


def run(kernel, dtype, device="cpu"):
    v = values(dtype)
    y = torch.zeros((2, N), dtype=getattr(torch, dtype), device=device)
    kernel(torch.from_numpy(v).to(device), y)
    return [int(a) for a in y[0].cpu().tolist()], [int(a) for a in y[1].cpu().tolist()]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_width_lowers_for_cuda_to_the_cuda_intrinsics(dtype):
    source = tilelang.lower(counts(dtype), target="cuda").kernel_source
    wide = "ll" if "64" in dtype else ""
    assert f"__popc{wide}(" in source and f"__clz{wide}(" in source, source


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_width_lowers_for_metal(dtype):
    source = tilelang.lower(counts(dtype), target="metal").kernel_source
    assert "popcount(" in source and "clz(" in source, source


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_rewritten_counts_are_right_run_on_this_cpu_through_llvm(dtype):
    func = counts(dtype)
    rewritten = func.with_body(lower_gpu_bit_counts(func.body))
    assert not rewritten.body.same_as(func.body) or dtype in ("uint32", "uint64", "int32", "int64")
    kernel = tilelang.compile(rewritten, target="llvm", execution_backend="tvm_ffi")
    assert run(kernel, dtype) == python_counts(values(dtype), dtype)


def test_vector_lanes_and_wide_unsigned_counts_are_left_to_tvm():
    func = counts("uint32")
    assert lower_gpu_bit_counts(func.body).same_as(func.body)


@pytest.mark.parametrize("backend", [
    pytest.param("cython", marks=pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")),
    pytest.param("nvrtc", marks=pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")),
])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "uint16"])
def test_the_cuda_source_compiles(backend, dtype):
    kernel = tilelang.compile(counts(dtype), target="cuda", execution_backend=backend)
    assert "__popc" in kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")
@pytest.mark.parametrize("dtype", DTYPES)
def test_counts_on_a_cuda_device_match_python(dtype):
    kernel = tilelang.compile(counts(dtype), target="cuda")
    assert run(kernel, dtype, device="cuda") == python_counts(values(dtype), dtype)
