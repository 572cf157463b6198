"""Pointer parameters, pointer tables and ``T.make_tensor`` on CUDA: the device kernels take the
int64 addresses and cast them to typed pointers; the sources compile with ``nvcc -c`` and run on
the emulated GPU of tests/test_tileops_cuda.py (a block is an OpenMP team)."""

from __future__ import annotations

import functools
import pathlib
import re
import sys

import pytest
import torch

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
import pointer_kernels as PK  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge, the GPU emulator

SIZES, N, K, BM = [5, 12, 17], 16, 24, 8


@pytest.fixture(scope="module")
def cuda_sources():
    from tilelang_core.lowering import lower

    kernels = {
        "scaled_copy": PK.scaled_copy(grid=4),
        "table_copy": PK.table_copy(3, 24),
        "grouped_gemm": PK.grouped_gemm(SIZES, N, K, block_M=BM),
        "strided_view": PK.strided_view(6),
        "two_kernels": PK.two_kernels(8),
    }
    return {name: lower(func, target="cuda") for name, func in kernels.items()}


def test_cuda_kernels_take_addresses(cuda_sources):
    copy = cuda_sources["scaled_copy"]
    args = {a.name: (a.kind, a.dtype) for a in copy.device_kernels[0].args}
    assert args["a_ptr"] == ("scalar", "int64") and args["b_ptr"] == ("scalar", "int64")
    assert [p.pointer for p in copy.params] == ["cuda", "cuda", None, None]
    src = copy.device_source
    assert re.search(r"__global__ void (__launch_bounds__\(32\) )?main_kernel\(int64_t a_ptr, int64_t b_ptr", src), src
    assert "(float*)a_ptr" in src and "(float*)b_ptr" in src  # typed inside the device kernel
    table = cuda_sources["table_copy"].device_source
    assert re.search(r"\(half\*\)table_ptr\[\(\(int\)blockIdx.x\)\]", table), table  # per-block entry
    assert "(half*)table_ptr[0]" in table  # made before T.Kernel: declared in the kernel
    assert "(float*)x_ptr" in cuda_sources["strided_view"].device_source
    two = cuda_sources["two_kernels"]  # made before two T.Kernels: each kernel casts the address itself
    assert len(two.device_kernels) == 2 and two.device_source.count("(float*)table_ptr[1]") == 2


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_sources, tmp_path):
    CU.compile_translation_units(cuda_sources, tmp_path)


@functools.lru_cache(maxsize=None)
def _build_dir():
    import tempfile

    return pathlib.Path(tempfile.mkdtemp(prefix="emulated_pointers_"))


@CU.emulator
def test_emulated_gpu_pointer_kernels(cuda_sources):
    copy = CU._emulated(cuda_sources["scaled_copy"], _build_dir())
    m, n = 13, 6  # 4 blocks of 4 rows: 3 full, 1 partial, the guard keeps row 13 onwards
    a = torch.randn(m, n)
    b = torch.full((m + 3, n), -1.0)
    copy(a.data_ptr(), b.data_ptr(), m, n)
    torch.testing.assert_close(b[:m], a * 2)
    assert bool((b[m:] == -1).all())

    gemm = CU._emulated(cuda_sources["grouped_gemm"], _build_dir())
    a, w, c, args = PK.grouped_gemm_operands(SIZES, N, K, block_M=BM)
    gemm(*args)
    for got, x, y in zip(c, a, w):
        torch.testing.assert_close(got, x @ y, rtol=1e-4, atol=1e-4)
