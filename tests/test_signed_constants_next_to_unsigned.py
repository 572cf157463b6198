"""A negative signed integer constant next to an unsigned operand (literals.signed_constants_as_unsigned).

Arithmetic, bitwise operators and comparisons convert the signed operand to the unsigned dtype
when the unsigned one is at least as wide (docs/language.md), as a run-time value is converted.
For a *constant* (``T.int32(-1) + T.uint32(1)``, ``T.int8(-1) < T.uint8(1)``) TVM 0.27 stopped the
kernel's definition with its internal "Check failed: (value >= 0) is false: cannot make uint from
negative value -1". The constant is now its two's complement in the unsigned dtype, which gives the
same values as the same operation on run-time operands of those dtypes.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T

EXPECTED = [
    0,  # T.int8(-1) < T.uint8(1): 255 < 1
    0,  # T.int32(-1) < T.uint32(1)
    1,  # T.int16(-3) == T.uint16(65533)
    0,  # T.int32(-1) + T.uint32(1): wraps to 0
    3,  # U[0] + T.int32(-2) of U[0] = 5
    253,  # T.int8(-1) * T.uint8(3): 765 mod 256
    5,  # T.int32(-1) & U[0]
    0,  # I[0] + T.uint8(1) of a run-time int8 -1: the same rule, at run time
]


def _kernel():
    @T.prim_func
    def mixed(A: T.Tensor((8,), T.int64), U: T.Tensor((1,), T.uint32), I: T.Tensor((1,), T.int8)):
        with T.Kernel(1, threads=1):
            A[0] = T.if_then_else(T.int8(-1) < T.uint8(1), 1, 0)
            A[1] = T.if_then_else(T.int32(-1) < T.uint32(1), 1, 0)
            A[2] = T.if_then_else(T.int16(-3) == T.uint16(65533), 1, 0)
            A[3] = T.Cast("int64", T.int32(-1) + T.uint32(1))
            A[4] = T.Cast("int64", U[0] + T.int32(-2))
            A[5] = T.Cast("int64", T.int8(-1) * T.uint8(3))
            A[6] = T.Cast("int64", T.int32(-1) & U[0])
            A[7] = T.Cast("int64", I[0] + T.uint8(1))

    return mixed


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_negative_signed_constants_next_to_unsigned_operands_wrap_as_run_time_values(backend, target):
    kernel = tilelang.compile(_kernel(), target=target, execution_backend=backend)
    out = torch.zeros(8, dtype=torch.int64)
    kernel(out, torch.tensor([5], dtype=torch.uint32), torch.tensor([-1], dtype=torch.int8))
    assert out.tolist() == EXPECTED
