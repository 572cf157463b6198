"""A GPU grid sized by an integer scalar parameter (``T.Kernel(T.ceildiv(m, 64))`` with
``m: T.int32``): the artifact binds ``m`` to that parameter like a dynamic size, so every backend
reads it at call time. Before, lowering for CUDA refused such a kernel ("launch size ... uses 'm',
which is not a dynamic dimension of any tensor parameter"); CPU targets already ran it."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.artifact import SymbolBinding
from tilelang_core.calling import CallChecker
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

CU = load_private("test_tileops_cuda", "launch_scalar_test_tileops_cuda")  # the GPU emulator and nvcc (a private copy)


def _scaled_prefix():
    """``B[:m] = 2 * A[:m]`` over a grid of ``ceil(m / 64)`` blocks; the rest of B untouched."""

    @T.prim_func
    def scaled_prefix(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32), m: T.int32):
        with T.Kernel(T.ceildiv(m, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < m:
                    B[bx * 64 + i] = A[bx * 64 + i] * 2.0

    return scaled_prefix


def _two_scalars():
    """A 2-D grid from two scalars, one of them int64."""

    @T.prim_func
    def two_scalars(A: T.Tensor((64, 64), T.float32), rows: T.int32, cols: T.int64):
        with T.Kernel(T.ceildiv(cols, 16), T.ceildiv(rows, 8), threads=(16, 8)) as (bx, by):
            for i, j in T.Parallel(8, 16):
                if by * 8 + i < rows and bx * 16 + j < cols:
                    A[by * 8 + i, bx * 16 + j] = A[by * 8 + i, bx * 16 + j] + 1.0

    return two_scalars


def test_cuda_artifact_binds_the_scalar_that_sizes_the_grid():
    art = lower(_scaled_prefix(), target="cuda")
    assert art.symbols == [SymbolBinding(name="m", param_index=2, dim=None, dtype="int32")]
    assert art.device_kernels[0].launch.grid == ["((m - 1) // 64) + 1", 1, 1]
    both = lower(_two_scalars(), target="cuda")
    assert {(s.name, s.param_index) for s in both.symbols} == {("rows", 1), ("cols", 2)}
    # the CPU artifact needs no symbol: the block loops read the parameter themselves
    assert lower(_scaled_prefix(), target="c").symbols == []


def test_call_checker_reads_the_scalar_as_the_symbol():
    art = lower(_scaled_prefix(), target="cuda")
    checker = CallChecker(art, out_idx=[], device_type="cpu")
    a, b = torch.zeros(1024), torch.zeros(1024)
    assert checker.bind((a, b, 300), {}).symbols == {"m": 300}


def test_a_float_scalar_cannot_size_the_grid():
    @T.prim_func
    def float_grid(A: T.Tensor((64,), T.float32), x: T.float32):
        with T.Kernel(T.Cast("int32", x), threads=32) as bx:
            for i in T.Parallel(32):
                A[bx * 32 + i] = 1.0

    with pytest.raises(LoweringError, match="uses 'x', which is neither a dynamic dimension of a tensor parameter nor "
                                            "an integer scalar parameter"):
        lower(float_grid, target="cuda")


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths_run_the_same_kernel(path):
    kernel = compile_on(_scaled_prefix(), path)
    a, b = torch.randn(1024), torch.full((1024,), -7.0)
    kernel(a, b, 300)
    torch.testing.assert_close(b[:300], a[:300] * 2)
    assert torch.all(b[300:] == -7.0)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_compiles_with_nvcc(tmp_path):
    CU.compile_translation_units({"scaled_prefix": lower(_scaled_prefix(), target="cuda"),
                                  "two_scalars": lower(_two_scalars(), target="cuda")}, tmp_path)


@CU.emulator
@pytest.mark.parametrize("m", [0, 1, 300, 1024])
def test_emulated_gpu_launches_the_grid_the_scalar_asks_for(m, tmp_path):
    """Mock GPU device (the OpenMP emulation of CUDA blocks): the grid comes from ``m``."""
    run = CU._emulated(lower(_scaled_prefix(), target="cuda"), tmp_path)
    a, b = torch.randn(1024), torch.full((1024,), -7.0)
    run(a, b, m)
    torch.testing.assert_close(b[:m], a[:m] * 2)
    assert torch.all(b[m:] == -7.0)


@CU.emulator
def test_emulated_gpu_two_scalar_grid_with_an_int64_one(tmp_path):
    """Mock GPU device: a 2-D grid from an int32 and an int64 scalar (CUDA grids are 32-bit: the
    int64 extent is narrowed, the body still indexes with it)."""
    run = CU._emulated(lower(_two_scalars(), target="cuda"), tmp_path)
    a = torch.zeros(64, 64)
    run(a, 20, 37)
    want = torch.zeros(64, 64)
    want[:20, :37] = 1.0
    assert torch.equal(a, want)
