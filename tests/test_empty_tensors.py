"""Empty tensors are valid arguments whatever strides torch gives them.

torch calls any empty tensor contiguous: ``torch.randn(3, 0)`` has strides ``(1, 1)``, not the
compact ``(0, 1)`` TVM checks, so tvm_ffi refused it ("Mismatched A.strides ... expected to be
compact array") while cython ran the kernel. Every CPU pair runs a row sum over ``(m, n)``
inputs with ``n == 0`` or ``m == 0``.
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


def row_sums():
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def row_sum(A: T.Tensor((m, n), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, 4), threads=4) as bx:
            for i in T.Parallel(4):
                if bx * 4 + i < m:
                    B[bx * 4 + i] = 0.0
                    for j in T.serial(n):
                        B[bx * 4 + i] = B[bx * 4 + i] + A[bx * 4 + i, j]

    return row_sum


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_empty_inputs_with_any_strides_run(backend, target):
    kernel = tilelang.compile(row_sums(), out_idx=-1, target=target, execution_backend=backend)
    for a in (torch.randn(3, 0), torch.randn(0, 5), torch.randn(0, 3).t(), torch.randn(5, 4)[:, 4:]):
        assert a.is_contiguous()  # torch's view of every empty tensor
        assert torch.equal(kernel(a), a.sum(dim=1)), (backend, target, tuple(a.shape), a.stride())


def copies():
    m, n = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def copy2d(A: T.Tensor((m, n), "float32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(m, 4), threads=4) as bx:
            for i, j in T.Parallel(4, n):
                if bx * 4 + i < m:
                    C[bx * 4 + i, j] = A[bx * 4 + i, j]

    return copy2d


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_an_empty_output_gets_strides_every_backend_takes(backend, target):
    """An (m, 0) output the kernel allocates: torch.empty gives it strides (1, 1), which TVM
    refused, and tvm_ffi's retry on the general path allocated it the same way again, until
    Python's recursion limit (RecursionError)."""
    kernel = tilelang.compile(copies(), out_idx=-1, target=target, execution_backend=backend)
    for a in (torch.empty(10, 0), torch.empty(0, 3), torch.randn(6, 2)[:, 2:]):
        out = kernel(a)
        assert out.shape == a.shape, (backend, target, tuple(a.shape))
    a = torch.randn(5, 3)
    assert torch.equal(kernel(a), a)
