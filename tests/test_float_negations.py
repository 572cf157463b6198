"""``not`` of a float comparison is true for NaN operands (lowering/float_negations.py).

TVM's simplifier turned ``not (a < b)`` into ``a >= b``, false for NaN: ``if not (A[i] < B[i])``
took the wrong branch for every NaN on every target. Each form here runs on every CPU pair, in
four float dtypes, with a static and a dynamic size, against torch; the CUDA source compiles.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

NAN, INF = float("nan"), float("inf")
A_VALUES = [NAN, 1.0, 2.0, NAN, -INF, 0.0, 3.0, 1.0]
B_VALUES = [1.0, NAN, 1.0, NAN, 1.0, -0.0, 3.0, 2.0]
#: column -> torch reference on a, b (bool)
COLUMNS = [
    lambda a, b: ~(a < b),
    lambda a, b: ~(a >= b),
    lambda a, b: ~((a <= b) & (a > -INF)),
    lambda a, b: ~((a > b) | (b != b)),
    lambda a, b: ~~(a < b),
]


def negations(n, dtype):
    @T.prim_func
    def negate(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n, len(COLUMNS)), "int32")):
        with T.Kernel(T.ceildiv(n, 4), threads=4) as bx:
            for k in T.Parallel(4):
                i = bx * 4 + k
                if i < n:
                    if not (A[i] < B[i]):
                        C[i, 0] = 1
                    else:
                        C[i, 0] = 0
                    C[i, 1] = T.if_then_else(T.Not(A[i] >= B[i]), 1, 0)
                    C[i, 2] = T.if_then_else(not (A[i] <= B[i] and A[i] > T.cast(-INF, dtype)), 1, 0)
                    C[i, 3] = T.if_then_else(not (A[i] > B[i] or B[i] != B[i]), 1, 0)
                    C[i, 4] = T.if_then_else(not (not (A[i] < B[i])), 1, 0)

    return negate


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("size", ["static", "dynamic"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_not_of_a_float_comparison_is_true_for_nan(backend, target, size, dtype):
    if backend == "ctypes" and dtype in ("float16", "bfloat16"):
        pytest.skip("the retired ctypes backend declares no 16-bit floats")
    n = len(A_VALUES)
    kernel = tilelang.compile(negations(n if size == "static" else T.dynamic("n"), dtype), out_idx=[2], target=target,
                              execution_backend=backend)
    a = torch.tensor(A_VALUES, dtype=getattr(torch, dtype))
    b = torch.tensor(B_VALUES, dtype=getattr(torch, dtype))
    got = kernel(a, b)
    for column, ref in enumerate(COLUMNS):
        assert got[:, column].tolist() == ref(a, b).int().tolist(), (column, backend, target, size, dtype)


def test_integer_negations_are_left_to_the_simplifier():
    from tilelang_core.lowering import lower

    @T.prim_func
    def ints(A: T.Tensor((8,), "int32"), C: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                C[i] = T.if_then_else(not (A[i] < 3), 1, 0)

    source = lower(ints, target="c").device_source
    assert "isnan" not in source and "3 <= A_ptr[i]" in source.replace("(", "").replace(")", ""), source


NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_cuda_source_compiles_with_nvcc(dtype):
    kernel = tilelang.compile(negations(T.dynamic("n"), dtype), out_idx=[2], target="cuda", execution_backend="cython")
    assert " != " in kernel.get_kernel_source()  # isnan(x), as CUDA code prints it: x != x
