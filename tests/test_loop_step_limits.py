"""Stepped loops with run-time bounds near the integer limits run as Python's ``range`` does.

lowering/loop_steps.py computed a stepped loop's iteration count in the loop's own dtype:
``(hi + s) - lo - 1`` of int32 bounds near the limits overflowed (undefined behaviour in C), and
``T.serial(lo, hi, s)`` with ``(0, 2**31-1, 2**30)`` ran no iteration instead of two; ``k * s``
and ``-s`` of ``s = -2**31`` overflowed too. Checked here, on every CPU path: the count and every
value of the loop variable (their xor) for int32 and int64 loops with run-time bounds and steps of
either sign, ``MIN`` steps included, and int64 loops with a constant step and start.
"""

from __future__ import annotations

import sys
from functools import reduce
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

M32, M64 = 2**31 - 1, 2**63 - 1
INT32_RANGES = [(0, M32, 2**30), (-M32 - 1, M32, 2**30), (M32, -M32 - 1, -2**30), (0, M32, M32), (-5, M32, M32),
                (M32, -M32 - 1, -M32 - 1), (5, -M32 - 1, -M32 - 1), (-M32 - 1, M32, M32), (M32, -M32 - 1, -M32),
                (-M32 - 1, -M32 + 4, 2), (M32 - 6, M32, 3), (-M32 + 6, -M32 - 1, -3), (10, 0, -3), (0, 10, -1), (3, 9, 0)]
INT64_RANGES = [(0, M64, 2**62), (-M64 - 1, M64, 2**62), (M64, -M64 - 1, -2**62), (-5, M64, M64),
                (M64, -M64 - 1, -M64 - 1), (5, -M64 - 1, -M64 - 1), (M64, -M64 - 1, -M64), (M64, M64 - 9, -1),
                (-M64 - 1, M64, 2**61 + 7), (-7, 8, 3), (8, -7, -3), (0, 9, 0)]


def _stepped(dtype: str):
    @T.prim_func
    def stepped(A: T.Tensor((2,), dtype), lo: T.int64 if dtype == "int64" else T.int32,
                hi: T.int64 if dtype == "int64" else T.int32, s: T.int64 if dtype == "int64" else T.int32):
        with T.Kernel(1) as bx:
            for i in T.serial(lo, hi, s):
                A[0] = A[0] + 1
                A[1] = A[1] ^ i

    return stepped


@T.prim_func
def constant_steps(A: T.Tensor((4,), "int64"), hi: T.int64):
    with T.Kernel(1) as bx:
        for i in T.serial(T.int64(-2**63), hi, T.int64(2**62)):
            A[0] = A[0] + 1
            A[1] = A[1] ^ i
        for i in T.serial(T.int64(2**63 - 1), hi, T.int64(-2**63)):
            A[2] = A[2] + 1
            A[3] = A[3] ^ i


def _expected(*ranges) -> list:
    out = []
    for r in ranges:
        r = range(*r) if r[2] else range(0)  # a run-time step of 0: no iteration
        out += [len(r), reduce(lambda a, b: a ^ b, r, 0)]
    return out


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_run_time_bounds_near_the_limits(backend, target, dtype):
    kernel = tilelang.compile(_stepped(dtype), execution_backend=backend, target=target)
    for r in INT32_RANGES if dtype == "int32" else INT64_RANGES:
        A = torch.zeros(2, dtype=getattr(torch, dtype))
        kernel(A, *r)
        assert A.tolist() == _expected(r), r


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_int64_constant_steps_and_starts_at_the_limits(backend, target):
    kernel = tilelang.compile(constant_steps, execution_backend=backend, target=target)
    for hi in [M64, 0, -M64 - 1, -1]:
        A = torch.zeros(4, dtype=torch.int64)
        kernel(A, hi)
        assert A.tolist() == _expected((-2**63, hi, 2**62), (M64, hi, -2**63)), hi
