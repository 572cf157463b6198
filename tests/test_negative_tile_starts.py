"""A tile region that starts before its buffer (a halo: ``T.copy(A[bx * BM - 1], S)``): the tile
operators guarded only the upper end, so block 0 read ``A[-1]`` and ``T.fill`` wrote before the
tensor wherever the access guards were off (``tl.disable_safe_memory_legalize``, and GPU targets,
which have none), and a copy into a tile at a negative run-time start ended the process (Bus error).
The elements before the start now read as 0 and are not written, as those past the end."""

from __future__ import annotations

import pathlib
import shutil
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id  # noqa: E402

N, BM = 33, 16
UNGUARDED = {"tl.disable_safe_memory_legalize": True}


@T.prim_func
def halo(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
    with T.Kernel(T.ceildiv(N, BM), threads=BM) as bx:
        S = T.alloc_shared((BM,), "float32")
        T.copy(A[bx * BM - 1], S)  # block 0 starts at -1
        T.copy(S, O[bx * BM])


@T.prim_func
def fill_before(O: T.Tensor((N,), "float32")):
    with T.Kernel(T.ceildiv(N, BM), threads=BM) as bx:
        T.fill(O[bx * BM - 1:bx * BM + BM - 1], 1.0)


@T.prim_func
def tile_at(A: T.Tensor((16,), "float32"), O: T.Tensor((8,), "float32"), s: T.int32):
    with T.Kernel(1, threads=8):
        S = T.alloc_shared((16,), "float32")
        R = T.alloc_fragment((8,), "float32")
        T.copy(A, S)
        T.copy(S[s:s + 8], R)  # s = -3: three elements before the tile
        T.fill(S[s:s + 8], -1.0)
        T.copy(R, O)


@pytest.mark.parametrize("configs", [None, UNGUARDED], ids=["guarded", "unguarded"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_halo_copy_and_fill_before_the_tensor_stay_inside(path, configs):
    backend, target = path
    shifted = tilelang.compile(halo, execution_backend=backend, target=target, pass_configs=configs)
    memory = torch.full((N + 8,), 99.0)  # 99 just before A
    a = memory[8:]
    a.copy_(torch.arange(N, dtype=torch.float32))
    o = torch.zeros(N)
    shifted(a, o)
    assert torch.equal(o, torch.cat([torch.zeros(1), a[:-1]])), o[:4]
    filler = tilelang.compile(fill_before, execution_backend=backend, target=target, pass_configs=configs)
    canary = torch.full((N + 8,), -7.0)
    filler(canary[4:4 + N])
    assert canary[:4].tolist() == [-7.0] * 4 and canary[4:4 + N - 1].eq(1.0).all(), canary[:6]


@pytest.mark.parametrize("configs", [None, UNGUARDED], ids=["guarded", "unguarded"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_tile_region_at_a_negative_run_time_start_reads_zeros(path, configs):
    backend, target = path
    kernel = tilelang.compile(tile_at, execution_backend=backend, target=target, pass_configs=configs)
    o = torch.full((8,), 5.0)
    kernel(torch.arange(16, dtype=torch.float32), o, -3)
    assert o.tolist() == [0, 0, 0, 0, 1, 2, 3, 4]


def test_the_cuda_source_guards_the_lower_end_and_compiles():
    source = tilelang.lower(tile_at, target="cuda").device_source
    assert "(0 <= (s + ((int)threadIdx.x)))" in source, source
    if shutil.which("nvcc") is not None:  # the lower guard, simplified: 1 <= bx * 16 + tx
        kernel = tilelang.compile(halo, target="cuda", execution_backend="cython")
        assert "if ((1 <= ((((int)blockIdx.x) * 16) + ((int)threadIdx.x))) && " in kernel.get_kernel_source()
