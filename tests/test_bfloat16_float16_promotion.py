"""A bfloat16 operand next to a float16 one is computed in float32, as torch promotes them
(language/literals.py ``half_pair_operands``).

TVM 0.27 cast the bfloat16 operand to float16: ``C_f32 = A_bf16 * B_f16`` gave
``[inf, 1.19e-07, inf]`` where torch gives ``[90000, 9.996e-08, 3.004e38]`` (float16 lacks
bfloat16's range, bfloat16 float16's precision). Checked: the dtypes of ``+ - * /``, ``T.max``,
comparisons and ``T.if_then_else`` of such a pair, both orders, vectors too; the values against
torch on every CPU pair; other pairs (float8 next to a 16-bit float) reach TVM unchanged.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

N = 4


@pytest.mark.parametrize("lanes", ["", "x4"])
def test_bfloat16_next_to_float16_is_float32(lanes):
    a, h = tirx.Var("a", "bfloat16" + lanes), tirx.Var("h", "float16" + lanes)
    for x, y in ((a, h), (h, a)):
        for result in (x + y, x - y, x * y, x / y, T.max(x, y), T.min(x, y), T.if_then_else(x < y, x, y)):
            assert str(result.ty.dtype) == "float32" + lanes, result
        assert str((x < y).a.ty.dtype) == "float32" + lanes


def test_other_float_pairs_are_unchanged():
    f8, h, a = tirx.Var("f", "float8_e4m3fn"), tirx.Var("h", "float16"), tirx.Var("a", "bfloat16")
    assert str((f8 * h).ty.dtype) == "float16" and str((f8 * a).ty.dtype) == "bfloat16"
    assert str((a * a).ty.dtype) == "bfloat16" and str((h * h).ty.dtype) == "float16"
    assert str((a * 1.5).ty.dtype) == "float32"


def _kernel():
    @T.prim_func
    def mixed(A: T.Tensor((N,), T.bfloat16), B: T.Tensor((N,), T.float16), C: T.Tensor((N,), T.float32),
              D: T.Tensor((N,), T.bfloat16), E: T.Tensor((N,), T.float32)):
        with T.Kernel(1) as _:
            for i in T.Parallel(N):
                C[i] = A[i] * B[i]
                D[i] = B[i] + A[i]
                E[i] = T.max(A[i], B[i]) + T.if_then_else(A[i] > B[i], 1.0, 0.0)

    return mixed


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_values_match_torch(backend, target):
    if backend == "ctypes":
        pytest.skip("the ctypes backend takes no bfloat16 or float16 tensors")
    kernel = tilelang.compile(_kernel(), execution_backend=backend, target=target)
    a = torch.tensor([300.0, 1e-3, 3e38, 70000.0], dtype=torch.bfloat16)
    b = torch.tensor([300.0, 1e-4, 1.0, 60000.0], dtype=torch.float16)
    c, e = torch.zeros(N), torch.zeros(N)
    d = torch.zeros(N, dtype=torch.bfloat16)
    kernel(a, b, c, d, e)
    assert torch.promote_types(torch.bfloat16, torch.float16) == torch.float32
    torch.testing.assert_close(c, (a * b).float(), rtol=0, atol=0)
    torch.testing.assert_close(d, (b + a).to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(e, torch.maximum(a, b).float() + (a > b).float(), rtol=0, atol=0)
