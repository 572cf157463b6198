"""``T.abs`` and ``T.reduce_absmax`` of a signed integer's minimum wrap as torch's ``abs``.

``T.abs`` was TVM's ``select(x >= 0, x, 0 - x)``, whose ``0 - MIN`` overflows: C leaves it
undefined and LLVM's optimizer takes ``|x| >= 0`` for granted, so ``max(|MIN|, 3)`` was 3 on ``c``
and MIN on ``llvm``, and TVM's simplifier folded ``|x| < 0`` to false. ``T.reduce_absmax`` started
from 0, which beat a row of only MIN (int8 -128 gave 0; torch's ``x.abs().amax()`` gives -128),
and on ``llvm`` an int32 row ``[MIN] * 7 + [5]`` gave MIN. Checked on every CPU pair against torch,
for int8/int16/int32/int64: ``T.abs``, ``max(T.abs(x), 3)``, ``T.abs(x) < 0``, ``T.abs(a - b)``,
and ``reduce_absmax`` into a fragment and into a shared tile (both ways a reduction accumulates).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

DTYPES = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64}
N = 6
COLUMNS = 4


def _abs_kernel(dtype):
    @T.prim_func
    def absolute(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N, COLUMNS), dtype)):
        with T.Kernel(1):
            for i in T.Parallel(N):
                C[i, 0] = T.abs(A[i])
                C[i, 1] = T.max(T.abs(A[i]), T.cast(3, dtype))
                C[i, 2] = T.if_then_else(T.abs(A[i]) < T.cast(0, dtype), T.cast(1, dtype), T.cast(0, dtype))
                C[i, 3] = T.abs(A[i] - B[i])

    return absolute


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_abs_of_minimum_wraps(backend, target, dtype):
    tdt = DTYPES[dtype]
    low, high = torch.iinfo(tdt).min, torch.iinfo(tdt).max
    A = torch.tensor([low, -5, 5, 0, high, low + 1], dtype=tdt)
    B = torch.tensor([0, 0, 0, 1, 0, 1], dtype=tdt)  # A - B: MIN, -5, 5, -1, MAX, MIN
    kernel = tilelang.compile(_abs_kernel(dtype), execution_backend=backend, target=target)
    C = torch.full((N, COLUMNS), 7, dtype=tdt)
    kernel(A, B, C)
    expected = torch.stack([
        A.abs(),
        torch.maximum(A.abs(), torch.tensor(3, dtype=tdt)),
        (A.abs() < 0).to(tdt),
        (A.to(torch.int64) - B.to(torch.int64)).to(tdt).abs(),  # the wrapped difference, as the kernel's
    ], dim=1)
    assert torch.equal(C, expected), C.tolist()


ROWS, COLS = 4, 8


def _absmax_kernel(dtype, scope):
    @T.prim_func
    def absmax(A: T.Tensor((ROWS, COLS), dtype), S: T.Tensor((ROWS,), dtype)):
        with T.Kernel(1):
            a = T.alloc_fragment((ROWS, COLS), dtype)
            s = T.alloc_shared((ROWS,), dtype) if scope == "shared" else T.alloc_fragment((ROWS,), dtype)
            T.copy(A, a)
            T.reduce_absmax(a, s, dim=1)
            T.copy(s, S)

    return absmax


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("scope", ["fragment", "shared"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_reduce_absmax_of_minimum_rows(backend, target, dtype, scope):
    tdt = DTYPES[dtype]
    low = torch.iinfo(tdt).min
    A = torch.full((ROWS, COLS), low, dtype=tdt)
    A[1, 7] = 5  # [MIN] * 7 + [5]: 5 on c, MIN on llvm before
    A[2] = torch.tensor([-3, 2, 0, -1, 1, 0, 2, -2], dtype=tdt)
    A[3] = 0
    kernel = tilelang.compile(_absmax_kernel(dtype, scope), execution_backend=backend, target=target)
    S = torch.full((ROWS,), 99, dtype=tdt)
    kernel(A, S)
    assert torch.equal(S, A.abs().amax(1)), S.tolist()
