"""Python floats beyond float32's range: in float64 kernels a store ``B[0] = 1e300``, a
``T.alloc_var("float64")`` assignment and ``T.float64(1e300)`` stopped the definition with TVM's
"Literal value 1e+300 exceeds maximum of float32" (the literal was made a float32 constant first),
while ``A[0] * 1e300`` worked (language/literals.py)."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


_NUMPY_TENTH = np.float64(0.1)


@T.prim_func
def _wide(A: T.Tensor((4,), "float64"), B: T.Tensor((4,), "float64")):
    with T.Kernel(1, threads=1) as _:
        B[0] = 1e300
        B[1] = T.float64(np.float64(-1.5e308))
        x = T.alloc_var("float64")
        x = -1e300
        B[2] = x
        B[3] = _NUMPY_TENTH  # numpy's float64 too: float64's 0.1, not float32's


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_wide_float64_literals_are_stored_exactly(backend, target):
    kernel = tilelang.compile(_wide, target=target, execution_backend=backend)
    a, b = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    kernel(a, b)
    assert b.tolist() == [1e300, -1.5e308, -1e300, 0.1]


@T.prim_func
def _past_float32(B: T.Tensor((3,), "float32")):
    with T.Kernel(1, threads=1) as _:
        B[0] = -3.4028235e38  # numpy's print of float32's lowest: rounds to -FLT_MAX
        B[1] = 1e39  # past float32's range: inf, as C and torch store it
        m = T.alloc_var("float32")
        m = 3.4028235e38
        B[2] = m


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_floats_past_float32s_range_are_stored_rounded_as_c_does(backend, target):
    """TVM refused them ("Literal value -3.40282e+38 exceeds minimum of float32")."""
    kernel = tilelang.compile(_past_float32, target=target, execution_backend=backend)
    b = torch.zeros(3)
    kernel(b)
    lowest = torch.finfo(torch.float32).min
    assert b.tolist() == [lowest, float("inf"), -lowest]
    assert torch.tensor([-3.4028235e38, 1e39, 3.4028235e38], dtype=torch.float32).tolist() == b.tolist()


@T.prim_func
def _wide_ints(A: T.Tensor((2,), "float32"), D: T.Tensor((2,), "float64"), B: T.Tensor((2,), "float32"),
               E: T.Tensor((2,), "float64")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(2):
            B[i] = A[i] * 2**63
            E[i] = D[i] + 2**64


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_python_ints_past_int64_beside_float_operands_are_floats(backend, target):
    """TVM refused them with its FFI signature ("Expected `ir.Expr` but got `ffi.BigInt`")."""
    kernel = tilelang.compile(_wide_ints, target=target, execution_backend=backend)
    a, d = torch.tensor([1.0, -0.5]), torch.tensor([0.0, 1.0], dtype=torch.float64)
    b, e = torch.zeros(2), torch.zeros(2, dtype=torch.float64)
    kernel(a, d, b, e)
    assert b.tolist() == (a * 2.0**63).tolist() and e.tolist() == (d + 2.0**64).tolist()
