"""A left shift of two constants into or past the sign bit wraps around, as in torch.

``T.int32(1) << 31`` stopped the kernel's definition with TVM's "Literal value 2147483648 exceeds
range of int32": TVM folded the two constants without wrapping (language/literals.py,
``folded_left_shift``). language.md says such a shift wraps, as a run-time one does.
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


@T.prim_func
def constant_shifts(Y: T.Tensor((4,), "int32"), Z: T.Tensor((2,), "int64"), U: T.Tensor((1,), "uint32")):
    with T.Kernel(1) as bx:
        Y[0] = T.int32(1) << 31
        Y[1] = T.shift_left(T.int32(3), 30)
        Y[2] = T.int32(-1) << 31
        Y[3] = T.int32(5) << 2
        Z[0] = T.int64(3) << 62
        Z[1] = T.int64(1) << 63
        U[0] = T.uint32(3) << 31


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_constant_left_shifts_into_the_sign_bit_wrap_around(backend, target):
    Y, Z = torch.zeros(4, dtype=torch.int32), torch.zeros(2, dtype=torch.int64)
    U = torch.zeros(1, dtype=torch.uint32)
    tilelang.compile(constant_shifts, execution_backend=backend, target=target)(Y, Z, U)
    expected = torch.tensor([1, 3, -1, 5], dtype=torch.int32) << torch.tensor([31, 30, 31, 2], dtype=torch.int32)
    assert Y.tolist() == expected.tolist() == [-2**31, -2**30, -2**31, 20]
    assert Z.tolist() == [(3 << 62) - 2**64, -2**63]
    assert U.tolist() == [2**31]
