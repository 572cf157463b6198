"""CPU (`c` target) kernels built by the cython backend, checked against torch."""

from __future__ import annotations

import torch

import kernels as K


def test_blocked_matmul_parallel_blocks():
    k = K.build(K.matmul_blocked(), out_idx=[2])
    for m, n, kk in ((64, 48, 32), (37, 5, 19), (1, 1, 1)):
        a, b = torch.randn(m, kk), torch.randn(kk, n)
        torch.testing.assert_close(k(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_stream_keyword_is_accepted_on_cpu():
    k = K.build(K.vadd_static(), out_idx=[2])
    a = torch.randn(16)
    torch.testing.assert_close(k(a, a, stream=None), a + a)


def test_large_input_releases_gil_and_is_correct():
    k = K.build(K.vadd_dynamic(), out_idx=[2])
    a, b = torch.randn(1 << 18), torch.randn(1 << 18)
    torch.testing.assert_close(k(a, b), a + b)


def test_kernel_object_metadata_and_repr():
    k = K.build(K.vadd_static(), out_idx=[2])
    assert k.name == "vadd" and k.__name__ == "vadd"
    assert "vadd(A, B)" in repr(k)
    assert k.meta["plan"]["outputs"] == [2]
    assert k.meta["library"].endswith(".so") and k.meta["source"] is None  # build files removed once loaded
    assert k.meta["library_data"][:4] in (b"\x7fELF", b"\xcf\xfa\xed\xfe") and "__tl_cy_call" in k.meta["source_text"]
