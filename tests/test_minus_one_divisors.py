"""Integer floor division and remainder by the constant -1 inside another floor division or
remainder (lowering/minus_one_divisors.py). TVM's ``LowerIntrin`` stopped the LLVM path with its
internal "Binding of variable rmod ... conflicts with previous binding" for
``T.floordiv(x, -1) // y`` (found by a differential fuzz pass); every CPU path now computes
Python's values."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

X = [5, -5, 7, 1, -1, 4, 100, -100, 0, 9]
Y = [3, 3, -3, -3, 2, -2, 7, -7, 5, -4]


def _kernel(dtype):
    n = len(X)

    @T.prim_func
    def minus_one(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n, 4), dtype)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                C[i, 0] = T.floordiv(A[i], T.cast(-1, dtype)) // B[i]
                C[i, 1] = (A[i] // T.cast(-1, dtype)) % B[i]
                C[i, 2] = T.floormod(A[i], T.cast(-1, dtype)) // B[i] + A[i] // T.cast(-1, dtype)
                C[i, 3] = T.floordiv(A[i] + B[i], T.cast(-1, dtype)) * 2

    return minus_one


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_floor_division_by_minus_one_inside_another(path, dtype):
    tdt = getattr(torch, dtype)
    a, b = torch.tensor(X, dtype=tdt), torch.tensor(Y, dtype=tdt)
    c = torch.zeros(len(X), 4, dtype=tdt)
    compile_on(_kernel(dtype), path)(a, b, c)
    want = [[(-x) // y, (-x) % y, 0 // y + -x, -(x + y) * 2] for x, y in zip(X, Y)]
    assert c.tolist() == want
