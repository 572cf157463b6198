"""Correctness of tvm_ffi kernels against torch: static and dynamic shapes, with and without out_idx."""

from __future__ import annotations

import pytest
import torch
from _tvmffi_helpers import build

from tilelang_backend_tvmffi.testing import sum_kernel


def test_static_sum_writes_output_in_place():
    k = sum_kernel(3)
    a, b, c = torch.randn(16), torch.randn(16), torch.empty(16)
    assert k(a, b, c) is None
    torch.testing.assert_close(c, a + b)


@pytest.mark.parametrize("num_tensors", [2, 8, 16])
def test_static_sum_many_tensors_out_idx(num_tensors):
    k = sum_kernel(num_tensors, out_idx=[-1])
    xs = [torch.randn(16) for _ in range(num_tensors - 1)]
    out = k(*xs)
    assert out.shape == (16,) and out.dtype == torch.float32
    torch.testing.assert_close(out, torch.stack(xs).sum(0))


def test_parallel_matmul_against_torch():
    k = build("matmul", out_idx=[-1])
    a, b = torch.randn(37, 16), torch.randn(16, 32)
    torch.testing.assert_close(k(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_misaligned_views_are_staged_not_crashing():
    """TVM's LLVM code assumes 64-byte aligned data; a view with an offset must still work."""
    k = build("scale_add")
    assert k._state.alignment == 64
    big_a, big_c = torch.randn(4 * 20 + 1), torch.zeros(4 * 20 + 1)
    a = big_a[1:].view(20, 4)  # 4 bytes past an aligned address
    c = big_c[1:].view(20, 4)
    b = torch.randn(20, 4)
    assert a.data_ptr() % 64 and c.data_ptr() % 64
    k(a, b, c, 1.5)
    torch.testing.assert_close(c, a + 1.5 * b)  # results copied back into the misaligned view
    assert big_c[0] == 0


def test_stream_argument_is_ignored_on_cpu():
    k = build("scale_add", out_idx=[2])
    a, b = torch.randn(2, 4), torch.randn(2, 4)
    torch.testing.assert_close(k(a, b, 1.0, stream=0), a + b)


def test_kernel_object_describes_itself():
    k = build("pad1", out_idx=[1])
    assert k.artifact.name == "pad1" and k.out_idx == (1,) and k.backend == "tvm_ffi"
    assert "pad1" in repr(k)


def test_kernels_declaring_element_alignment_skip_the_pointer_check():
    """With buffers declared align=<itemsize>, TVM assumes no 64-byte alignment; the backend reads
    that from the IR and the generated call has no data_ptr() check (cheaper per call)."""
    k = build("vadd_elem_aligned", out_idx=[2])
    assert k._state.alignment == 0
    assert "data_ptr" not in k.call_plan_code
    big = torch.randn(64 * 5 + 1)
    a = big[1:].view(5, 64)
    b = torch.randn(5, 64)
    torch.testing.assert_close(k(a, b), a + b)
