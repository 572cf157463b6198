"""Outputs come back in the order ``out_idx`` lists them, as in TileLang (``c, b = kernel(a)``
with ``out_idx=[-1, -2]``). Backends return outputs in parameter order; before, so did the
kernel, and such a call got its two tensors swapped."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


def two_outputs(n):
    @T.prim_func
    def kernel(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=8):
            for i in T.serial(n):
                B[i] = A[i] + 1.0
            for i in T.Parallel(4):
                C[i] = A[i] * 10.0

    return kernel


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("backend, target", cpu_pairs())
def test_outputs_in_the_listed_order(backend, target, dynamic):
    a = torch.arange(8, dtype=torch.float32)
    func = two_outputs(T.dynamic("n") if dynamic else 8)
    for out_idx, first_is_c in (([-1, -2], True), ([2, 1], True), ([1, 2], False), ([-2, -1], False)):
        kernel = tilelang.compile(func, target=target, execution_backend=backend, out_idx=out_idx)
        first, second = kernel(a)
        c, b = (first, second) if first_is_c else (second, first)
        assert torch.equal(c, a[:4] * 10) and torch.equal(b, a + 1), out_idx
        assert kernel.out_idx == [i % 3 for i in out_idx]


def test_profiler_pairs_the_listed_outputs_with_the_reference(tmp_path):
    kernel = tilelang.compile(two_outputs(8), target="c", execution_backend="cython", out_idx=[-1, -2])
    kernel.get_profiler().assert_allclose(lambda a: (a[:4] * 10, a + 1), atol=0, rtol=0)
    with pytest.raises(AssertionError, match="C: kernel has shape \\(4,\\), reference has shape \\(8,\\)"):
        kernel.get_profiler().assert_allclose(lambda a: (a + 1, a[:4] * 10))
    kernel.export(tmp_path / "two")
    again = tilelang.load(tmp_path / "two")
    c, b = again(torch.ones(8))
    assert c.shape == (4,) and b.shape == (8,)
