"""Comparisons on every CPU pair as in C and torch (lowering/llvm_comparisons.py): on ``llvm``,
TVM emitted ``a != b`` of floats as an ordered comparison (false for NaN) and ``==`` of two
booleans as a float comparison LLVM refused; ``+``, ``*``, ``-`` of two booleans did not lower on
``llvm`` (an internal TVM check) and now compute what C does (``||``, ``&&``, ``!=``); nor did
``<``, ``<=``, ``>``, ``>=``, ``T.min``, ``T.max`` and ``T.clamp`` of two booleans."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


def _kernel(n, dtype):
    @T.prim_func
    def compare(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), Z: T.Tensor((n, 5), "int32")):
        with T.Kernel(T.ceildiv(n, 8), threads=8) as bx:
            for i in T.Parallel(8):
                g = bx * 8 + i
                if g < n:
                    Z[g, 0] = T.if_then_else(A[g] != B[g], 1, 0)
                    Z[g, 1] = T.if_then_else(A[g] == B[g], 1, 0)
                    Z[g, 2] = T.if_then_else((A[g] > B[g]) == (B[g] > A[g]), 1, 0)
                    Z[g, 3] = T.if_then_else((A[g] >= B[g]) != (A[g] <= B[g]), 1, 0)
                    Z[g, 4] = T.if_then_else(A[g] != A[g], 1, 0)  # the NaN test

    return compare


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype,dynamic", [("float32", False), ("float64", True)], ids=["float32-static", "float64-dynamic"])
def test_comparisons_with_nans_and_of_booleans(backend, target, dtype, dynamic):
    n = 6
    kernel = tilelang.compile(_kernel(T.dynamic("n") if dynamic else n, dtype), target=target, execution_backend=backend)
    tdt = getattr(torch, dtype)
    a = torch.tensor([math.nan, 1.0, math.nan, 2.0, 5.0, -math.inf], dtype=tdt)
    b = torch.tensor([1.0, 1.0, math.nan, 3.0, 4.0, -math.inf], dtype=tdt)
    z = torch.zeros(n, 5, dtype=torch.int32)
    kernel(a, b, z)
    want = torch.stack([a != b, a == b, (a > b) == (b > a), (a >= b) != (a <= b), a != a], dim=1).int()
    assert torch.equal(z, want), (z, want)


@T.prim_func
def _bool_arith(A: T.Tensor((8,), "int16"), B: T.Tensor((8,), "int16"), Z: T.Tensor((3, 8), "bool")):
    with T.Kernel(1, threads=1) as bx:
        for i in T.Parallel(8):
            Z[0, i] = T.Cast("bool", A[i]) + T.Cast("bool", B[i])
            Z[1, i] = T.Cast("bool", A[i]) * T.Cast("bool", B[i])
            Z[2, i] = T.Cast("bool", A[i]) - T.Cast("bool", B[i])


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_arithmetic_of_booleans_is_or_and_xor(backend, target):
    kernel = tilelang.compile(_bool_arith, target=target, execution_backend=backend)
    a = torch.tensor([0, 1, 0, 2, -1, 0, 3, 0], dtype=torch.int16)
    b = torch.tensor([0, 0, 1, 5, 1, 0, 0, 7], dtype=torch.int16)
    z = torch.zeros(3, 8, dtype=torch.bool)
    kernel(a, b, z)
    x, y = a.bool(), b.bool()
    assert torch.equal(z, torch.stack([x + y, x * y, x ^ y])), z  # torch: + is or, * is and


@T.prim_func
def _bool_order(A: T.Tensor((4,), "bool"), B: T.Tensor((4,), "bool"), Z: T.Tensor((7, 4), "bool")):
    with T.Kernel(1, threads=1) as bx:
        for i in T.serial(4):
            Z[0, i] = A[i] < B[i]
            Z[1, i] = A[i] <= B[i]
            Z[2, i] = A[i] > B[i]
            Z[3, i] = A[i] >= B[i]
            Z[4, i] = T.min(A[i], B[i])
            Z[5, i] = T.max(A[i], B[i])
            Z[6, i] = T.clamp(A[i], B[i], True)


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_order_min_max_and_clamp_of_booleans_are_torchs(backend, target):
    kernel = tilelang.compile(_bool_order, target=target, execution_backend=backend)
    a = torch.tensor([False, False, True, True])
    b = torch.tensor([False, True, False, True])
    z = torch.zeros(7, 4, dtype=torch.bool)
    kernel(a, b, z)
    want = torch.stack([a < b, a <= b, a > b, a >= b, torch.minimum(a, b), torch.maximum(a, b),
                        torch.clamp(a.int(), b.int(), torch.ones(4, dtype=torch.int32)).bool()])
    assert torch.equal(z, want), z
