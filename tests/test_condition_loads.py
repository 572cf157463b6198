"""Shared-memory reads in ``if``/``while`` conditions and loop bounds on CUDA (lowering/condition_loads.py).

TVM 0.27's ThreadSync stopped such kernels with an internal check ("allow_append_ is false").
They now lower; their CUDA source compiles with ``nvcc -c`` and runs on the emulated GPU of
tests/test_tileops_cuda.py (one block is an OpenMP team, ``__syncthreads()`` a barrier) with the
results of a Python reference; the same kernels on the CPU paths give the same results (on ``c`` a loop extent read from a
shared tile used to break the block loop's work estimate, lowering/frontend.py ``block_work``).
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.lowering import lower
from tilelang_core.lowering.condition_loads import hoist_condition_loads, reads_synced_memory

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_condition_loads")

W = 8  # elements per row


def scan_kernel(rows: int):
    """Per row, in shared memory: the first index whose value is over 5 (a serial loop with
    ``if`` + ``break``), how many leading values are over 5 (a ``while`` on shared memory), and a
    loop whose extent is read from shared memory."""

    @T.prim_func
    def scan(A: T.Tensor((rows, W), "int32"), Out: T.Tensor((rows, 3), "int32")):
        with T.Kernel(rows, threads=32) as bx:
            s = T.alloc_shared((W + 1,), "int32")
            T.copy(A[bx, 0:W], s[0:W])
            s[W] = 0  # stops the while loop
            first = T.alloc_var("int32")
            first = -1
            for i in T.serial(W):
                if s[i] > 5:
                    first = i
                    break
            run = T.alloc_var("int32")
            run = 0
            while s[run] > 5:
                run = run + 1
            total = T.alloc_var("int32")
            total = 0
            for i in T.serial(s[W - 1] % 4):
                total = total + s[i]
            Out[bx, 0] = first
            Out[bx, 1] = run
            Out[bx, 2] = total

    return scan


def _reference(a: torch.Tensor) -> torch.Tensor:
    out = []
    for row in a.tolist():
        first = next((i for i, v in enumerate(row) if v > 5), -1)
        run = 0
        while run < W and row[run] > 5:
            run += 1
        total = sum(row[: row[W - 1] % 4])
        out.append([first, run, total])
    return torch.tensor(out, dtype=torch.int32)


def _inputs() -> torch.Tensor:
    a = torch.randint(0, 10, (6, W), dtype=torch.int32, generator=torch.Generator().manual_seed(5))
    a[0] = torch.tensor([9, 8, 7, 1, 0, 0, 0, 3])  # a run of three, then first == 0
    a[1] = torch.tensor([0, 1, 2, 3, 4, 5, 5, 2])  # nothing over 5
    a[2] = torch.tensor([6, 6, 6, 6, 6, 6, 6, 7])  # the run reaches the sentinel
    return a


@pytest.fixture(scope="module")
def artifact():
    return lower(scan_kernel(6), target="cuda")


def test_shared_reads_in_conditions_and_loop_bounds_lower_for_cuda(artifact):
    src = artifact.device_source
    body = src[src.index('extern "C" __global__'):]
    # the reads are bound first, then tested; the data is synchronised before them
    assert "bool cond = " in body and "int loop_extent = " in body, body
    assert body.index("__syncthreads()") < body.index("bool cond = "), body


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_their_cuda_source_compiles_with_nvcc(artifact, tmp_path):
    CU.compile_translation_units({"scan": artifact}, tmp_path)


@CU.emulator
def test_emulated_gpu_gives_the_reference_results(artifact, tmp_path):
    a = _inputs()
    out = torch.full((6, 3), 99, dtype=torch.int32)
    CU._emulated(artifact, tmp_path)(a, out)
    assert out.tolist() == _reference(a).tolist()


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_the_same_kernel_on_cpu_targets_gives_the_same_results(path):
    # on c the block loop's work estimate used to read the shared tile before it existed
    a = _inputs()
    out = torch.full((6, 3), 99, dtype=torch.int32)
    compile_on(scan_kernel(6), path)(a, out)
    assert out.tolist() == _reference(a).tolist()


def test_statements_without_shared_reads_are_left_as_they_are():
    @T.prim_func
    def plain(A: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=8) as bx:
            loc = T.alloc_local((2,), "int32")
            loc[0] = A[0]
            if loc[0] > 1:
                A[1] = 2
            while A[bx] > 100:
                A[bx] = A[bx] - 1

    body = plain.body
    assert not reads_synced_memory(body)
    assert hoist_condition_loads(body).same_as(body)
