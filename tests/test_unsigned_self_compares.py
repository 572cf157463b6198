"""An unsigned ``x + 1 > x`` or ``x < x + 1`` lowers and wraps (lowering/unsigned_compares.py).

TVM 0.27's simplifier rewrote these overflow checks of a uint8/uint16/uint32/uint64 ``x`` into
``0 - 1`` in the unsigned type and stopped with an internal check ("Minuend 's value is 0U ...
which will cause a negative uint"): the kernel did not lower on any path. Each kernel here runs on
every CPU pair and is compared with the wrapped values computed by torch in int64: the checks are
false for the type's maximum only; the forms that already worked (``>=``, ``x - 1 < x``,
``x + 2 > x + 1``, ``a + b > a``) are checked next to them.
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

N = 6
FORMS = 6
TORCH = {"uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64}


def _kernel(dtype):
    one, two = T.cast(1, dtype), T.cast(2, dtype)

    @T.prim_func
    def checks(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N, FORMS), "int32")):
        with T.Kernel(1):
            for i in T.Parallel(N):
                x = A[i]
                C[i, 0] = T.if_then_else(x + one > x, 1, 0)
                C[i, 1] = T.if_then_else(x < x + one, 1, 0)
                C[i, 2] = T.if_then_else(x + one >= x, 1, 0)
                C[i, 3] = T.if_then_else(x - one < x, 1, 0)
                C[i, 4] = T.if_then_else(x + two > x + one, 1, 0)
                C[i, 5] = T.if_then_else(x + B[i] > x, 1, 0)

    return checks


def _expected(values, others, bits):
    wrap = 1 << bits
    rows = []
    for x, b in zip(values, others):
        rows.append([(x + 1) % wrap > x, x < (x + 1) % wrap, (x + 1) % wrap >= x, (x - 1) % wrap < x,
                     (x + 2) % wrap > (x + 1) % wrap, (x + b) % wrap > x])
    return torch.tensor(rows, dtype=torch.int32)


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("dtype", list(TORCH))
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_unsigned_plus_one_compares_wrap(backend, target, dtype):
    bits = int(dtype[4:])
    top = (1 << bits) - 1
    values = [top, 0, 1, 2, top - 1, 1 << (bits - 1)]
    others = [1, 0, top, 5, 2, 1 << (bits - 1)]
    # uint64 values above 2**63 do not fit int64: built from their two's complement bits
    A = torch.tensor([v - (1 << 64) if v >= 1 << 63 else v for v in values], dtype=torch.int64)
    B = torch.tensor([v - (1 << 64) if v >= 1 << 63 else v for v in others], dtype=torch.int64)
    if bits < 64:
        A, B = A.to(TORCH[dtype]), B.to(TORCH[dtype])
    else:
        A, B = A.view(torch.uint64), B.view(torch.uint64)
    kernel = tilelang.compile(_kernel(dtype), execution_backend=backend, target=target)
    C = torch.full((N, FORMS), -1, dtype=torch.int32)
    kernel(A, B, C)
    assert torch.equal(C, _expected(values, others, bits)), C.tolist()
