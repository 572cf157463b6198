"""A static grid of 0 blocks (``T.Kernel(0)``, ``T.Kernel(4, 0)``, a negative extent) launches nothing,
as a dynamic grid that is 0 when the kernel is called does and as ``range(0)`` runs nothing.

Before, a static extent below 1 was a LoweringError at the ``with T.Kernel`` line ("T.Kernel grid
extent #0 must be >= 1, got 0") while docs/language.md says a grid of 0 launches nothing; without
that check the grid loops were dropped before the frontend looked for them ("malformed T.Kernel
grid" for ``T.Kernel(4, 0)``, "launches nothing on cuda: wrap its body in 'with T.Kernel(...)'").
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "empty_grid_emulator")

GRIDS = [(0,), (4, 0), (0, 3), (-2,), (2, 3, 0)]


def _kernel(grid):
    @T.prim_func
    def rows(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(*grid, threads=32) as blocks:
            bx = blocks[0] if isinstance(blocks, tuple) else blocks
            S = T.alloc_shared((16, 32), "float32")
            R = T.alloc_fragment((16,), "float32")
            T.copy(A[bx * 16 : (bx + 1) * 16, 0:32], S)
            T.reduce_sum(S, R, dim=1)
            T.copy(R, B[bx * 16 : (bx + 1) * 16])
            T.atomic_add(C[0:4], 1.0)

    return rows


def _inputs():
    return torch.ones(64, 32), torch.full((64,), -7.0), torch.zeros(4)


@pytest.mark.parametrize("grid", GRIDS, ids=str)
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths_run_no_block(path, grid):
    a, b, c = _inputs()
    compile_on(_kernel(grid), path)(a, b, c)
    assert torch.all(b == -7.0) and torch.all(c == 0.0), (b, c)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_nonempty_grid_still_runs(path):
    a, b, c = _inputs()
    compile_on(_kernel((4,)), path)(a, b, c)
    assert torch.all(b == 32.0) and torch.all(c == 4.0), (b, c)


def test_block_extent_of_an_empty_axis_is_zero():
    extents = []

    @T.prim_func
    def k(A: T.Tensor((4,), "int32")):
        with T.Kernel(4, -1) as (bx, by):
            extents.append(T.get_block_extents())
            A[bx] = by

    assert extents == [[4, 0, 1]]


@pytest.mark.parametrize("grid", GRIDS, ids=str)
def test_cuda_artifact_launches_an_empty_grid(grid):
    from tilelang_core.lowering import lower

    (kernel,) = lower(_kernel(grid), target="cuda").device_kernels
    want = [max(g, 0) for g in grid] + [1] * (3 - len(grid))
    assert list(kernel.launch.grid) == want  # backends skip a grid with an axis of 0


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_of_an_empty_grid_compiles_with_nvcc(tmp_path):
    from tilelang_core.lowering import lower

    CU.compile_translation_units({"empty_x": lower(_kernel((0,)), target="cuda"),
                                  "empty_y": lower(_kernel((4, 0)), target="cuda")}, tmp_path)


@CU.emulator
@pytest.mark.parametrize("grid", [(0,), (4, 0)], ids=str)
def test_emulated_gpu_launches_no_block(grid, tmp_path):
    """Mock GPU device (the OpenMP emulation of CUDA blocks): the grid has no block."""
    from tilelang_core.lowering import lower

    a, b, c = _inputs()
    CU._emulated(lower(_kernel(grid), target="cuda"), tmp_path)(a, b, c)
    assert torch.all(b == -7.0) and torch.all(c == 0.0), (b, c)


_N, _M = T.dynamic("n"), T.dynamic("m")


@T.prim_func
def _dynamic_grid(A: T.Tensor((_N,), "float32"), C: T.Tensor((2,), "int32")):
    n = _N
    with T.Kernel(n - 5, n - 6, threads=1) as (bx, by):
        T.atomic_add(C[0], 1)
        T.atomic_add(C[1], bx * 100 + by)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("n,blocks", [(3, 0), (5, 0), (4, 0), (8, 6)])
def test_run_time_extents_below_one_run_no_block(path, n, blocks):
    """Two negative run-time extents made a positive product: ``T.Kernel(n - 5, n - 6)`` ran
    2 * 3 = 6 blocks for n = 3 (with block indices that do not exist)."""
    c = torch.zeros(2, dtype=torch.int32)
    compile_on(_dynamic_grid, path)(torch.zeros(n), c)
    assert int(c[0]) == blocks
    if blocks:
        assert int(c[1]) == sum(bx * 100 + by for bx in range(n - 5) for by in range(n - 6))


@T.prim_func
def _offset_grid_copy(A: T.Tensor((_M, _N), "float32"), O: T.Tensor((_M, _N), "float32")):
    m, n = _M, _N
    with T.Kernel(T.ceildiv(n + 3, 4), T.ceildiv(m, 8), threads=32) as (bx, by):
        S = T.alloc_shared((8, 4), "float32")
        T.copy(A[by * 8, bx * 4], S)
        T.copy(S, O[by * 8, bx * 4])


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_run_time_grid_extent_the_lowering_cannot_prove_nonzero_compiles(path):
    """``T.Kernel(T.ceildiv(n + 3, 4), ...)``: the flat block index was split by the extent, which
    the division checks could not prove nonzero; the check's never-taken branch stopped llvm's bound
    analysis ("Check failed: y != 0")."""
    a = torch.randn(13, 9)
    o = torch.zeros_like(a)
    compile_on(_offset_grid_copy, path)(a, o)
    assert torch.equal(o, a)
