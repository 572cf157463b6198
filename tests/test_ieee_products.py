"""``a * b + c`` is two IEEE operations on every CPU pair, as in torch and on llvm.

GCC contracts a product and a sum into one fused multiply-add by default in GNU C mode (with
``-march=native`` on an FMA machine), so the C pairs (cython/c, tvm_ffi/c) computed ``x * x - y``
with one rounding: 2**-24 where torch and tvm_ffi/llvm give 0. The C entry now turns contraction
off (codegen.C_PREAMBLE); ``T.ieee_fmaf`` still fuses.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

BLOCK = 64


def _products(n):
    @T.prim_func
    def products(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32), Out: T.Tensor((n, 4), T.float32)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):  # a simd loop
                g = bx * BLOCK + i
                if g < n:
                    Out[g, 0] = X[g] * X[g] - Y[g]
                    Out[g, 1] = Y[g] - X[g] * X[g]
                    Out[g, 2] = X[g] * Y[g] + Y[g]
            for i in T.serial(BLOCK):  # a plain loop
                g = bx * BLOCK + i
                if g < n:
                    Out[g, 3] = X[g] * X[g] - Y[g]

    return products


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_products_and_sums_round_twice_as_in_torch(backend, target, dynamic):
    n = 200
    kernel = tilelang.compile(_products(T.dynamic("n") if dynamic else n), target=target, execution_backend=backend)
    gen = torch.Generator().manual_seed(7)
    x = 1 + torch.randint(1, 1 << 12, (n,), generator=gen).float() * 2.0**-12  # x * x is not a float32
    y = x * x  # rounded: x * x - y is 0 with two roundings, the product's low bits with one
    y[::3] = torch.randn(n, generator=gen)[::3]
    out = torch.zeros(n, 4)
    kernel(x, y, out)
    want = torch.stack([x * x - y, y - x * x, x * y + y, x * x - y], dim=1)
    assert torch.equal(out, want), (out - want).abs().max()
    assert (out[1::3, 0] == 0).all()  # the rows where y is the rounded square
