"""``x / 0.0`` of floats in kernels is IEEE's (and torch's) infinity or NaN (language/float_modulo.py).

Before, ``A[i] / 0.0`` (also ``A[i] / T.float32(0)``, ``A[i] / 0`` of a float ``A``, an integer
``A[i] / 0.0``) stopped the kernel's definition with TVM's bare "Check failed: fb->value != 0
(0 vs. 0) : Divide by zero": TVM folds every division by a constant 0. Now the quotient is an
infinity of the sign of ``x / 0.0`` (``-0.0`` flips it) and NaN for a zero or NaN ``x``, on every
CPU pair, as ``x // 0.0`` already was (test_float_remainders.py).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id  # noqa: E402

VALUES = [1.5, -2.0, 0.0, -0.0, math.nan, math.inf, -math.inf, 3.0]


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal values, NaN where NaN is wanted, and the sign of every infinity."""
    return torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0))


def _by_zero(dtype: str, zero: float):
    @T.prim_func
    def by_zero(A: T.Tensor((8,), dtype), B: T.Tensor((3, 8), dtype)):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(8):
                B[0, i] = A[i] / zero
                B[1, i] = A[i] / T.cast(zero, dtype)
                B[2, i] = A[i] / 0

    return by_zero


@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_float_divided_by_a_constant_zero_is_torchs(backend, target, dtype, zero):
    kernel = tilelang.compile(_by_zero(dtype, zero), target=target, execution_backend=backend)
    a = torch.tensor(VALUES, dtype=getattr(torch, dtype))
    b = torch.zeros((3, 8), dtype=a.dtype)
    kernel(a, b)
    for row, divisor in enumerate((zero, zero, 0.0)):
        want = a / torch.full_like(a, divisor)
        assert _same(b[row], want), (row, b[row].tolist(), want.tolist())


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_integer_divided_by_a_float_zero_is_a_float_quotient(backend, target):
    @T.prim_func
    def int_by_zero(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                B[i] = A[i] / 0.0

    kernel = tilelang.compile(int_by_zero, target=target, execution_backend=backend)
    a = torch.tensor([3, -1, 0, 7], dtype=torch.int32)
    b = torch.zeros(4)
    kernel(a, b)
    assert _same(b, a.float() / 0.0), b.tolist()


def test_vector_and_atomic_quotients_by_zero_on_llvm():
    """A ``T.Ramp`` load divided by 0.0 lane by lane; an atomic's previous value divided by 0.0
    runs the atomic once (the quotient repeats its operand)."""
    @T.prim_func
    def vector_by_zero(A: T.Tensor((8,), "float32"), C: T.Tensor((1,), "float32"), B: T.Tensor((9,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(2):
                B[T.Ramp(i * 4, 1, 4)] = A[T.Ramp(i * 4, 1, 4)] / 0.0
            B[8] = T.atomic_add(C[0], 1.0, return_prev=True) / 0.0

    kernel = tilelang.compile(vector_by_zero, target="llvm", execution_backend="tvm_ffi")
    a = torch.tensor(VALUES)
    c = torch.tensor([-2.0])
    b = torch.zeros(9)
    kernel(a, c, b)
    assert _same(b[:8], a / 0.0), b.tolist()
    assert b[8].item() == -math.inf and c.item() == -1.0, (b[8].item(), c.item())
