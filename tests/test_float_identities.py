"""Float expressions keep IEEE semantics through TVM's simplifier (lowering/float_identities.py):
``x - x``, ``(x + y) - x``, ``x - (x + y)``, ``(x + 1) - 1``, ``x == x`` and ``x != x``
were rewritten by rules of real numbers, on every target; ``x * 0``, ``0 * x`` and ``0 / x`` were
folded to 0 already when TVM built them (language/literals.py), dropping any call in ``x``."""

from __future__ import annotations

import math
import pathlib
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402
from private_modules import load_private  # noqa: E402

COLUMNS = 12


def _kernel(n, dtype):
    @T.prim_func
    def identities(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype), Out: T.Tensor((n, COLUMNS), dtype)):
        with T.Kernel(T.ceildiv(n, 16), threads=16) as bx:
            for i in T.Parallel(16):
                g = bx * 16 + i
                if g < n:
                    Out[g, 0] = X[g] - X[g]
                    Out[g, 1] = (X[g] + Y[g]) - X[g]
                    Out[g, 2] = X[g] - (X[g] + Y[g])
                    Out[g, 3] = (X[g] + T.cast(1, dtype)) - T.cast(1, dtype)
                    Out[g, 4] = T.if_then_else(X[g] == X[g], T.cast(1, dtype), T.cast(0, dtype))
                    Out[g, 5] = T.if_then_else(X[g] != X[g], T.cast(1, dtype), T.cast(0, dtype))
                    Out[g, 6] = (Y[g] + T.cast(2, dtype)) - T.cast(2, dtype)
                    Out[g, 7] = T.exp(X[g]) - T.exp(X[g])
                    Out[g, 8] = (Y[g] + X[g]) - X[g]
                    Out[g, 9] = X[g] * 0.0
                    Out[g, 10] = 0 * X[g]
                    Out[g, 11] = 0.0 / X[g]

    return identities


def _reference(x, y):
    one = torch.ones_like(x)
    return torch.stack(
        [x - x, (x + y) - x, x - (x + y), (x + one) - one, (x == x).to(x.dtype), (x != x).to(x.dtype), (y + 2) - 2,
         x.exp() - x.exp(), (y + x) - x, x * 0.0, 0 * x, 0.0 / x],
        dim=1,
    )


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype,dynamic", [("float32", False), ("float64", True)], ids=["float32-static", "float64-dynamic"])
def test_float_identities_keep_ieee_results(backend, target, dtype, dynamic):
    n = 8
    kernel = tilelang.compile(_kernel(T.dynamic("n") if dynamic else n, dtype), target=target, execution_backend=backend)
    tdt = getattr(torch, dtype)
    big = 1e8 if dtype == "float32" else 1e17
    x = torch.tensor([big, math.inf, -math.inf, math.nan, 1e-8 if dtype == "float32" else 1e-17, 3.0, -2.5, 0.0], dtype=tdt)
    y = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -7.0, 1e-8 if dtype == "float32" else 1e-17], dtype=tdt)
    out = torch.zeros(n, COLUMNS, dtype=tdt)
    kernel(x, y, out)
    want = _reference(x, y)
    same = (out == want) | (out.isnan() & want.isnan())
    assert bool(same.all()), [(r, c, float(out[r, c]), float(want[r, c])) for r, c in (~same).nonzero().tolist()]


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_product_with_zero_keeps_the_call_inside_it(backend, target):
    """``T.atomic_add(..., return_prev=True) * 0.0``: the atomic update still happens (TVM folded
    the product to 0 and the update with it)."""

    @T.prim_func
    def counted(X: T.Tensor((37,), "float32"), Total: T.Tensor((1,), "float32"), Out: T.Tensor((37,), "float32")):
        with T.Kernel(3) as bx:
            for i in T.serial(16):
                if bx * 16 + i < 37:
                    Out[bx * 16 + i] = T.atomic_add(Total[0], X[bx * 16 + i], return_prev=True) * 0.0 + 1.0

    x, total, out = torch.ones(37), torch.zeros(1), torch.zeros(37)
    tilelang.compile(counted, target=target, execution_backend=backend)(x, total, out)
    assert total.item() == 37.0 and bool((out == 1.0).all())


def test_ordinary_float_expressions_are_not_guarded():
    @T.prim_func
    def plain(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i] * X[i] - T.exp(X[i]) + X[i] * 2.0

    source = lower(plain, target="c").kernel_source
    assert "uint32_t" not in source.split("plain_kernel(", 2)[-1]  # no bit-level round trip


def _cuda_helpers():
    return load_private("test_tileops_cuda")


def test_cuda_source_keeps_the_operations_and_compiles(tmp_path):
    art = lower(_kernel(64, "float32"), target="cuda -arch=sm_80")
    body = art.kernel_source.split("identities_kernel", 1)[-1]
    stores = re.findall(r"Out_ptr\[.*?\] = ([^;]*);", body)
    assert len(stores) == COLUMNS
    assert all("X_ptr" in v or "Y_ptr" in v or "condval" in v for v in stores), stores  # nothing folded
    assert "*(uint" not in body  # the round trips are gone before code generation
    cuda = _cuda_helpers()
    if cuda.NVCC is None:
        pytest.skip("nvcc is not installed")
    cuda.compile_translation_units({"identities": art}, tmp_path)


def _signed_zero_kernel(dtype):
    @T.prim_func
    def signed_zeros(X: T.Tensor((4,), dtype), Y: T.Tensor((4, 6), dtype)):
        with T.Kernel(1, threads=4) as bx:
            for i in T.serial(4):
                Y[i, 0] = X[i] + 0.0
                Y[i, 1] = 0.0 + X[i]
                Y[i, 2] = X[i] - (-0.0)
                Y[i, 3] = X[i] + 0
                Y[i, 4] = X[i] - 0.0  # an identity in IEEE too: stays -0.0
                Y[i, 5] = X[i] + (-0.0)  # likewise

    return signed_zeros


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_sum_with_a_zero_keeps_ieee_signs(backend, target, dtype):
    """``-0.0 + 0.0`` is +0.0 in IEEE: TVM folded ``x + 0.0``, ``0.0 + x`` and ``x - (-0.0)`` to ``x``
    when it built them and again in its simplifier, and kept -0.0."""
    kernel = tilelang.compile(_signed_zero_kernel(dtype), target=target, execution_backend=backend)
    tdt = getattr(torch, dtype)
    x = torch.tensor([-0.0, 0.0, 1.5, -2.0], dtype=tdt)
    out = torch.full((4, 6), 7.0, dtype=tdt)
    kernel(x, out)
    signs = [math.copysign(1.0, v) for v in out[0].tolist()]
    assert signs == [1.0, 1.0, 1.0, 1.0, -1.0, -1.0], signs
    assert out[1:].tolist() == [[v] * 6 for v in x[1:].tolist()]


def test_cuda_source_keeps_the_sums_with_zero():
    body = lower(_signed_zero_kernel("float32"), target="cuda -arch=sm_80").device_source.split("signed_zeros_kernel", 1)[-1]
    stores = re.findall(r"Y_ptr\[.*?\] = ([^;]*);", body)
    assert len(stores) == 6 and all("0x0p+0f" in v for v in stores[:4]), stores  # the zero is added
    assert stores[4] == stores[5] == "X_ptr[i]" and "*(uint" not in body, stores
