"""``T.Parallel`` with a constant extent of 0 or less runs no iteration, as ``range(0)`` and
``T.serial(0)`` do; a tuple extent is refused (it was TVM's ``T.grid`` form, ``(start, extent)``:
``T.Parallel((1, 2), 16)`` ran rows 1 and 2, where a Python reader expects ``range(1, 2)``).

Found by fuzzing kernel definitions. Before: TVM dropped the empty loop nest before the frontend
paired it with its ``T.Parallel`` marker, and lowering stopped at the kernel's ``def`` line with
"T.Parallel must be used as the iterator of a for statement" (``T.Parallel(-1)``) or "malformed
T.Parallel loop nest" (``T.Parallel(16, 0)``), on every target.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower


def _kernel(extents):
    @T.prim_func
    def k(A: T.Tensor((4, 4), "float32"), B: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=4) as _:
            for i, j in T.Parallel(*extents):
                B[i, j] = A[i, j] * 2.0
            B[3, 3] = A[3, 3] + 1.0

    return k


EMPTY = [(0, 4), (4, -1)]


@pytest.mark.parametrize("extents", EMPTY, ids=str)
@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_empty_parallel_runs_no_iteration(extents, backend, target):
    kernel = tilelang.compile(_kernel(extents), target=target, execution_backend=backend)
    a = torch.randn(4, 4)
    b = torch.full((4, 4), -5.0)
    kernel(a, b)
    want = torch.full((4, 4), -5.0)
    want[3, 3] = a[3, 3] + 1.0
    torch.testing.assert_close(b, want, rtol=0, atol=0)


@pytest.mark.parametrize("extents", EMPTY, ids=str)
def test_empty_parallel_lowers_for_cuda(extents):
    src = lower(_kernel(extents), target="cuda").device_source
    assert "* 2.0" not in src and "2.000000e+00f" not in src, src
