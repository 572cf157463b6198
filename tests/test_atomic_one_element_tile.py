"""Tile-form atomics whose destination is one element (``T.atomic_add(C[0:1], v)``,
``T.atomic_max(C[i:i + 1], tile_of_one)``): one update per block, as for every other tile.

The tile's extents are empty once its unit dimensions are dropped, and the update was emitted as a
plain statement instead of a ``T.Parallel`` nest, so on CUDA every thread of the block ran it: with
128 threads, ``C[0]`` grew by ``128 * v`` per block. It is now a ``T.Parallel(1)`` loop (one thread).
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "atomic_one_element_emulator")

BLOCKS, THREADS = 5, 64


def _kernel():
    @T.prim_func
    def one_element(A: T.Tensor((BLOCKS,), "int32"), C: T.Tensor((4,), "int32")):
        with T.Kernel(BLOCKS, threads=THREADS) as bx:
            S = T.alloc_shared((1,), "int32")
            T.copy(A[bx], S)
            T.atomic_add(C[0:1], 3)  # scalar value
            T.atomic_add(C[1:2], S)  # one-element tile value
            T.atomic_max(C[2:3], A[bx : bx + 1])  # one-element region value
            T.atomic_add(C[3:4], 1)

    return one_element


def _want(a, c):
    want = c.clone()
    want[0] += 3 * BLOCKS
    want[1] += int(a.sum())
    want[2] = max(int(want[2]), int(a.max()))
    want[3] += BLOCKS
    return want


def _inputs():
    a = torch.tensor([4, -2, 9, 1, 7], dtype=torch.int32)
    c = torch.tensor([10, 20, -5, 0], dtype=torch.int32)
    return a, c


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths(path):
    a, c = _inputs()
    want = _want(a, c)
    compile_on(_kernel(), path)(a, c)
    assert torch.equal(c, want)


def test_cuda_source_guards_the_update_to_one_thread():
    from tilelang_core.lowering import lower

    src = lower(_kernel(), target="cuda").device_source
    body = src[src.rindex("__global__"):]
    for index in ("0", "1", "2", "3"):
        call = re.search(r"(.*)tl_atomic_\w+\(\(&\(C_ptr\[" + index + r"\]\)\)", body)
        assert call, body
        # the update sits inside `if (threadIdx.x < 1)`: the line before it opens that guard
        before = body[: call.start()].rstrip().splitlines()[-1]
        assert "threadIdx.x) < 1)" in before, body


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
def test_emulated_gpu_one_update_per_block(tmp_path):
    from tilelang_core.lowering import lower

    a, c = _inputs()
    want = _want(a, c)
    CU._emulated(lower(_kernel(), target="cuda"), tmp_path)(a, c)
    assert torch.equal(c, want), (c, want)
