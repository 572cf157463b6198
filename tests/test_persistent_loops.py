"""``T.Persistent``: a fixed number of workers share a tile domain (lowering/persistent.py).

A persistent kernel launches as many blocks as it has workers and lets each walk the tiles
``index, index + wave_size, ...`` of the domain. Every coordinate must be visited exactly once,
whatever the domain, the number of workers and the group size, and in the documented order
(groups of ``group_size`` consecutive values of the last dimension). Checked on every CPU
backend and target against a Python model of that order, on CUDA by compiling the source with
nvcc and running it on the GPU emulator of test_tileops_cuda.py (OpenMP threads as the block's
threads), and on a device by the ``gpu``-marked test.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_persistent")

CPU_PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


def visit_kernel(domain, workers: int, group_size=8):
    """Each worker adds 1 to every coordinate it visits and writes its visit number there."""
    ndim = len(domain)

    @T.prim_func
    def visit(Visited: T.Tensor(domain, T.int32), Step: T.Tensor(domain, T.int32)):
        with T.Kernel(workers, threads=1) as worker:
            step = T.alloc_var(T.int32, 0)
            if ndim == 1:
                for i in T.Persistent(domain, workers, worker, group_size):
                    Visited[i] += 1
                    Step[i] = step
                    step += 1
            elif ndim == 2:
                for i, j in T.Persistent(domain, workers, worker, group_size):
                    Visited[i, j] += 1
                    Step[i, j] = step
                    step += 1
            else:
                for i, j, k in T.Persistent(domain, workers, worker, group_size):
                    Visited[i, j, k] += 1
                    Step[i, j, k] = step
                    step += 1

    return visit


def model_order(domain, workers: int, group_size) -> dict:
    """coordinate -> (worker, visit number), from the order docs/language.md describes."""
    last = domain[-1]
    group = max(1, min(group_size or 1, last))
    groups = -(-last // group)
    inner = [g for g in domain[:-1]]
    tiles = groups * group
    for extent in inner:
        tiles *= extent
    seen, steps = {}, [0] * workers
    for tile in range(tiles):
        rest, coords = tile // group, []
        for extent in reversed(inner):
            coords.insert(0, rest % extent)
            rest //= extent
        coord = (*coords, rest * group + tile % group)
        worker = tile % workers
        if coord[-1] < last:
            assert coord not in seen
            seen[coord] = (worker, steps[worker])
            steps[worker] += 1
    return seen


CASES = [((10,), 3, 4), ((5, 7), 3, 8), ((8, 16), 4, 8), ((6, 20), 5, 3), ((3, 4, 5), 7, 2), ((1, 1), 4, 8), ((4, 9), 2, None)]


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
@pytest.mark.parametrize("domain,workers,group", CASES, ids=[f"{d}-w{w}-g{g}" for d, w, g in CASES])
def test_every_tile_is_visited_once_in_the_documented_order(backend, target, domain, workers, group):
    kernel = tilelang.compile(visit_kernel(domain, workers, group), target=target, execution_backend=backend)
    visited = torch.zeros(domain, dtype=torch.int32)
    step = torch.full(domain, -1, dtype=torch.int32)
    kernel(visited, step)
    assert torch.equal(visited, torch.ones_like(visited)), visited
    expected = torch.empty(domain, dtype=torch.int32)
    for coord, (_, number) in model_order(domain, workers, group).items():
        expected[coord] = number
    assert torch.equal(step, expected)


def tiled_add_kernel(workers: int, tile: int = 8, threads: int = 64):
    """Persistent tiles of ``Y = X + 1`` over a dynamic ``(m, n)`` matrix, each tile a T.Parallel."""
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def tiled_add(X: T.Tensor((m, n), T.float32), Y: T.Tensor((m, n), T.float32)):
        with T.Kernel(workers, threads=threads) as worker:
            for ti, tj in T.Persistent([T.ceildiv(m, tile), T.ceildiv(n, tile)], workers, worker, 2):
                for i, j in T.Parallel(tile, tile):
                    if ti * tile + i < m and tj * tile + j < n:
                        Y[ti * tile + i, tj * tile + j] = X[ti * tile + i, tj * tile + j] + 1.0

    return tiled_add


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_persistent_tiles_over_a_dynamic_domain_match_torch(backend, target):
    kernel = tilelang.compile(tiled_add_kernel(workers=3), target=target, execution_backend=backend)
    for shape in [(37, 29), (8, 8), (1, 70)]:
        x = torch.randn(shape)
        y = torch.zeros(shape)
        kernel(x, y)
        torch.testing.assert_close(y, x + 1)


@pytest.fixture(scope="module")
def cuda_artifact():
    return lower(tiled_add_kernel(workers=5), target="cuda")


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_persistent_cuda_source_compiles_with_nvcc(cuda_artifact, tmp_path):
    CU.compile_translation_units({"tiled_add": cuda_artifact}, tmp_path)


@CU.emulator
def test_emulated_gpu_persistent_tiles_match_torch(cuda_artifact, tmp_path):
    """Mock GPU device (the OpenMP emulation of a CUDA block of test_tileops_cuda.py)."""
    run = CU._emulated(cuda_artifact, tmp_path)
    x = torch.randn(45, 31)
    y = torch.zeros(45, 31)
    run(x, y)
    torch.testing.assert_close(y, x + 1)


@pytest.mark.gpu
@CU.requires_gpu
def test_gpu_persistent_tiles_match_torch():
    kernel = tilelang.compile(tiled_add_kernel(workers=5), target="cuda")
    x = torch.randn(45, 31, device="cuda")
    y = torch.zeros(45, 31, device="cuda")
    kernel(x, y)
    torch.testing.assert_close(y, x + 1)


def test_an_empty_domain_is_refused_naming_the_operator():
    with pytest.raises(Exception, match=r"T.Persistent.*non-empty list of extents"):

        @T.prim_func
        def empty(A: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=1) as worker:
                for i in T.Persistent([], 2, worker):
                    A[i] = 1


def test_a_wave_size_below_one_is_refused():
    with pytest.raises(Exception, match=r"T.Persistent: wave_size must be at least 1, got 0"):

        @T.prim_func
        def no_workers(A: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=1) as worker:
                for i in T.Persistent([4], 0, worker):
                    A[i] = 1
