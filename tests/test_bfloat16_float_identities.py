"""bfloat16 products, quotients and sums with a zero keep IEEE semantics (lowering/float_identities.py).

``x * 0.0``, ``0.0 * x``, ``x * 0``, ``0.0 / x`` of a bfloat16 ``x`` were folded to 0 and
``x + 0.0`` to ``x`` (keeping -0.0), on every CPU path and on CUDA before sm_80, while float16,
float32 and float64 were right: ``BF16ComputeLegalize`` (lowering/passes.py ``_bf16_compute``),
which ran before the guard, rebuilt each float32 operation on a legalized bfloat16 operand with
TVM's folding constructors. The guard now runs before it too, and hides a bfloat16 operand as its
float32 value (a bfloat16 round trip through ``uint16`` did not survive the legalizer). Checked
against torch on every CPU pair, serial and vectorized, with the other identities the guard keeps
(``x - x``, ``(x + y) - x``, ``x != x``), and in the CUDA sources.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

N = 8
ROWS = 14


def _kernel(vectorized):
    @T.prim_func
    def zeros(A: T.Tensor((N,), T.bfloat16), B: T.Tensor((N,), T.bfloat16), O: T.Tensor((ROWS, N), T.bfloat16)):
        with T.Kernel(1) as _:
            for i in T.vectorized(N) if vectorized else T.Parallel(N):
                O[0, i] = A[i] * 0.0
                O[1, i] = 0.0 * A[i]
                O[2, i] = A[i] * 0
                O[3, i] = A[i] * T.bfloat16(0)
                O[4, i] = 0.0 / A[i]
                O[5, i] = T.bfloat16(0) / A[i]
                O[6, i] = A[i] + 0.0
                O[7, i] = 0.0 + A[i]
                O[8, i] = A[i] + T.bfloat16(0)
                O[9, i] = A[i] - T.bfloat16(-0.0)
                O[10, i] = A[i] - A[i]
                O[11, i] = (A[i] + B[i]) - A[i]
                O[12, i] = T.if_then_else(A[i] != A[i], T.bfloat16(1), T.bfloat16(0))
                O[13, i] = (A[i] + T.bfloat16(1)) - T.bfloat16(1)

    return zeros


def _reference(a, b):
    zero = torch.zeros((), dtype=torch.bfloat16)
    one = torch.ones((), dtype=torch.bfloat16)
    return torch.stack([a * 0.0, 0.0 * a, a * 0, a * zero, 0.0 / a, zero / a, a + 0.0, 0.0 + a, a + zero,
                        a - (-zero), a - a, (a + b) - a, (a != a).to(a.dtype), (a + one) - one])


def _inputs():
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([nan, inf, -inf, -0.0, 0.0, -2.5, 3.0, 1e-30], dtype=torch.bfloat16)
    b = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1e-2, 1e30], dtype=torch.bfloat16)
    return a, b


def _same_values(got, want):
    """Bit for bit but for NaNs (any NaN matches any NaN): the sign of a zero counts."""
    nan = want.isnan()
    if not torch.equal(got.isnan(), nan):
        return False
    g, w = got[~nan], want[~nan]
    return torch.equal(g, w) and torch.equal(torch.signbit(g), torch.signbit(w))


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("vectorized", [False, True], ids=["serial", "vectorized"])
def test_bfloat16_operations_with_a_zero_match_torch(backend, target, vectorized):
    if backend == "ctypes":
        pytest.skip("the ctypes backend takes no bfloat16 tensors")
    kernel = tilelang.compile(_kernel(vectorized), execution_backend=backend, target=target)
    a, b = _inputs()
    out = torch.full((ROWS, N), 7.0, dtype=torch.bfloat16)
    kernel(a, b, out)
    want = _reference(a, b)
    wrong = [row for row in range(ROWS) if not _same_values(out[row], want[row])]
    assert not wrong, {row: (out[row].tolist(), want[row].tolist()) for row in wrong}


def test_generated_c_keeps_the_zero_operations():
    source = lower(_kernel(False), target="c").device_source
    assert not re.search(r"= tl_bf16_round\(0\.000000e\+00f\);", source)  # a product folded to a rounded 0
    assert "* 0.000000e+00f" in source and "0.000000e+00f /" in source and "+ 0.000000e+00f" in source


@pytest.mark.parametrize("target", ["cuda", "cuda -arch=sm_75"], ids=["native", "before-sm80"])
def test_cuda_source_keeps_the_zero_operations(target):
    source = lower(_kernel(False), target=target).device_source
    assert not re.search(r"= tl_bf16_round\(0x0p\+0f/\*0\.000000e\+00\*/\);", source)
    assert "* 0x0p+0f" in source and "0x0p+0f/*0.000000e+00*/ / " in source and "+ 0x0p+0f" in source
