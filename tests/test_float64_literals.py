"""Python floats beyond float32's range in float64 kernels: a store ``B[0] = 1e300``, a
``T.alloc_var("float64")`` assignment and ``T.float64(1e300)`` stopped the definition with TVM's
"Literal value 1e+300 exceeds maximum of float32" (the literal was made a float32 constant first),
while ``A[0] * 1e300`` worked (language/literals.py)."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


@T.prim_func
def _wide(A: T.Tensor((4,), "float64"), B: T.Tensor((4,), "float64")):
    with T.Kernel(1, threads=1) as _:
        B[0] = 1e300
        B[1] = T.float64(-1.5e308)
        x = T.alloc_var("float64")
        x = -1e300
        B[2] = x
        B[3] = 0.1  # float64's 0.1, not float32's


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_wide_float64_literals_are_stored_exactly(backend, target):
    kernel = tilelang.compile(_wide, target=target, execution_backend=backend)
    a, b = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    kernel(a, b)
    assert b.tolist() == [1e300, -1.5e308, -1e300, 0.1]
