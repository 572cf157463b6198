"""``T.ceildiv(n, b)`` of a signed integer expression is ``(n - 1) // b + 1`` (language/core.py):
``(n + b - 1) // b`` overflowed for an int32 ``n`` within ``b`` of 2**31 (``T.ceildiv(2**31 - 1, 4)``
was negative, and a loop ``for t in T.serial(T.ceildiv(n, 64))`` ran no iteration). The value is
ceil(n / b) for every ``n`` (negative ones too), on every CPU pair and in CUDA source; the loop
bound stays one shift and one addition for a power-of-two ``b``."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

DIVISORS = (1, 4, 48, 64)
VALUES = (0, 1, 5, 63, 64, 65, -1, -5, -64, -65, 2**31 - 1, 2**31 - 2, 2**31 - 47, -(2**31) + 1)


def _quotients(count, dtype):
    """``Q[i, j] = T.ceildiv(N[i], DIVISORS[j])`` for ``count`` values of ``dtype``."""

    @T.prim_func
    def quotients(N: T.Tensor((count,), dtype), Q: T.Tensor((count, len(DIVISORS)), dtype)):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(count):
                Q[i, 0] = T.ceildiv(N[i], 1)
                Q[i, 1] = T.ceildiv(N[i], 4)
                Q[i, 2] = T.ceildiv(N[i], 48)
                Q[i, 3] = T.ceildiv(N[i], 64)

    return quotients


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_ceildiv_is_exact_up_to_the_int32_maximum(backend, target):
    kernel = tilelang.compile(_quotients(len(VALUES), "int32"), target=target, execution_backend=backend)
    n = torch.tensor(VALUES, dtype=torch.int32)
    q = torch.full((len(VALUES), len(DIVISORS)), -7, dtype=torch.int32)
    kernel(n, q)
    want = [[-(-v // b) for b in DIVISORS] for v in VALUES]
    assert q.tolist() == want


U_VALUES = (0, 1, 5, 63, 64, 65, 2**31, 2**32 - 1, 2**32 - 2, 2**32 - 47, 2**32 - 64)


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_unsigned_ceildiv_is_exact_up_to_the_maximum(backend, target, dtype):
    """Found by a fuzz pass: ``(n + b - 1) // b`` wrapped for ``n`` within ``b`` of the maximum
    (``T.ceildiv(x, 64)`` of the uint32 ``2**32 - 1`` was 0)."""
    bits = int(dtype[4:])
    top = 2**bits - 2**32  # the uint32 values moved to the top of a uint64
    vals = [v + (top if v >= 2**31 else 0) for v in U_VALUES]
    signed = getattr(torch, f"int{bits}")
    as_signed = [v - 2**bits if v >= 2 ** (bits - 1) else v for v in vals]
    kernel = tilelang.compile(_quotients(len(U_VALUES), dtype), target=target, execution_backend=backend)
    n = torch.tensor(as_signed, dtype=signed).view(getattr(torch, dtype))
    q = torch.zeros((len(vals), len(DIVISORS)), dtype=signed).view(getattr(torch, dtype))
    kernel(n, q)
    got = [[v % 2**bits for v in row] for row in q.view(signed).tolist()]
    assert got == [[-(-v // b) for b in DIVISORS] for v in vals]


def _counted(block):
    @T.prim_func
    def counted(C: T.Tensor((1,), "int64"), n: T.int32):
        with T.Kernel(1, threads=1) as bx:
            C[0] = T.int64(0)
            for t in T.serial(T.ceildiv(n, block)):
                C[0] = C[0] + T.int64(1)

    return counted


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("block", [2**30, 3 * 2**28])
def test_a_loop_bound_near_the_int32_maximum_runs_every_iteration(backend, target, block):
    kernel = tilelang.compile(_counted(block), target=target, execution_backend=backend)
    c = torch.full((1,), -7, dtype=torch.int64)
    kernel(c, 2**31 - 1)
    assert int(c[0]) == -(-(2**31 - 1) // block)


def test_expressions_and_their_code():
    n, u = tirx.Var("n", "int32"), tirx.Var("u", "uint32")
    assert str(T.ceildiv(n, 64)) == "(n - 1) // 64 + 1"
    assert "- T.uint32(1)" not in str(T.ceildiv(u, 64))  # unsigned: u // 64 + (u % 64 != 0), no wrap
    assert T.ceildiv(tirx.IntImm("int32", 2**31 - 1), 4).value == 2**29  # folded, no overflow
    assert T.ceildiv(10, 4) == 3 and T.ceildiv(-10, 4) == -2

    for target, loop in (("c", "for (int32_t t = 0; t < (((n - 1) >> 6) + 1); ++t)"),
                         ("cuda -arch=sm_80", "for (int t = 0; t < (((n - 1) >> 6) + 1); ++t)")):
        art = lower(_counted(64), target=target)
        source = art.kernel_source if target == "c" else art.device_source
        assert loop in source, source


def test_a_causal_loop_bound_folds_through_index_arithmetic():
    """``T.ceildiv((bx + 1) * 64, 128)`` (the causal bound of attention kernels with block_M 64 and
    block_N 128) is ``(bx >> 1) + 1`` in CUDA source; the exact form with a remainder, tried for
    the type minimum's sake, left ``min(((bx * 64) + 64) & 127, 1)`` in it."""

    @T.prim_func
    def causal(A: T.Tensor((4096,), "float32")):
        with T.Kernel(32, threads=128) as bx:
            for k in T.serial(T.ceildiv((bx + 1) * 64, 128)):
                A[k * 128] = 1.0

    source = lower(causal, target="cuda -arch=sm_90").device_source
    assert "((((int)blockIdx.x) >> 1) + 1)" in source, source
    assert "& 127" not in source, source
