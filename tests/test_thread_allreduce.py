"""TVM's raw ``T.tvm_thread_allreduce`` whose reduced threads are a name given
``T.get_thread_binding(d)`` (the style of upstream TileLang's gemv example).

Before, such a kernel did not lower for CUDA: the name is a one-element local variable here, and
TVM's ``LowerThreadAllreduce`` stopped with "arg4should be a VarNode or IntImmNode"
(lowering/thread_allreduce.py). The source now compiles with nvcc and, run on the OpenMP
emulation of a CUDA block (tests/test_tileops_cuda.py), gives torch's matrix-vector product.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_allreduce")  # nvcc lookup, the GPU emulator


def row_dot(n: int, k: int, rows_per_block: int = 4, lanes: int = 8, chunk: int = 4, thread_arg: str = "name"):
    """``y[i] = sum_j W[i, j] * x[j]``: ``lanes`` threads (threadIdx.y) each sum a strided part of a
    row, then one ``T.tvm_thread_allreduce`` over threadIdx.y adds the partial sums."""
    step = lanes * chunk

    @T.prim_func
    def row_dot_kernel(W: T.Tensor((n, k), "float32"), x: T.Tensor((k,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, rows_per_block), threads=(rows_per_block, lanes)) as bx:
            row = T.get_thread_binding(0)
            lane = T.get_thread_binding(1)
            part = T.alloc_local((1,), "float32")
            total = T.alloc_local((1,), "float32")
            part[0] = 0.0
            for s in T.serial(T.ceildiv(k, step)):
                for c in T.serial(chunk):
                    col = s * step + lane * chunk + c
                    if col < k and bx * rows_per_block + row < n:
                        part[0] += W[bx * rows_per_block + row, col] * x[col]
            with T.attr(T.comm_reducer(lambda a, b: a + b, [T.float32(0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                if thread_arg == "name":
                    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, total[0], lane, dtype="handle"))
                else:
                    T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, total[0], lane + 1, dtype="handle"))
            if bx * rows_per_block + row < n:
                y[bx * rows_per_block + row] = total[0]

    return row_dot_kernel


@pytest.fixture(scope="module")
def artifact():
    return lower(row_dot(37, 100), target="cuda")


def test_the_reduction_lowers_over_the_named_thread_index(artifact):
    src = artifact.device_source
    assert "red_buf" in src or "__shfl" in src, src  # TVM's tree through shared memory, or warp shuffles
    assert "tvm_thread_allreduce" not in src


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_the_source_compiles_with_nvcc(artifact, tmp_path):
    CU.compile_translation_units({"row_dot": artifact}, tmp_path, arch="sm_80")


@CU.emulator
def test_emulated_gpu_gives_torchs_matrix_vector_product(artifact, tmp_path):
    """Mock GPU device (OpenMP emulation of a CUDA block): the partial sums of the 8 lanes meet."""
    w, x = torch.randn(37, 100), torch.randn(100)
    y = torch.full((37,), float("nan"))
    CU._emulated(artifact, tmp_path)(w, x, y)
    torch.testing.assert_close(y, w @ x, rtol=1e-4, atol=1e-4)


def test_a_thread_operand_that_is_an_expression_names_the_operand():
    with pytest.raises(LoweringError) as info:
        lower(row_dot(37, 100, thread_arg="expression"), target="cuda")
    text = str(info.value)
    assert "T.tvm_thread_allreduce: operand 4 (lane + 1)" in text and "must be a thread index" in text, text
    assert f"{Path(__file__).name}:" in text.split("T.tvm_thread_allreduce")[0], text
