"""CPU (`c` target) kernels built by the cython backend, checked against torch."""

from __future__ import annotations

import threading

import pytest
import torch

import kernels as K


def test_static_add_in_place():
    k = K.build(K.vadd_static())
    a, b, c = torch.randn(16), torch.randn(16), torch.empty(16)
    assert k(a, b, c) is None
    torch.testing.assert_close(c, a + b)


def test_static_add_out_idx_returns_tensor():
    k = K.build(K.vadd_static(), out_idx=[2])
    a, b = torch.randn(16), torch.randn(16)
    out = k(a, b)
    assert isinstance(out, torch.Tensor) and out.shape == (16,) and out.dtype == torch.float32
    assert out.is_contiguous() and out.device.type == "cpu"
    torch.testing.assert_close(out, a + b)
    assert k(a, b) is not out  # a fresh tensor per call


@pytest.mark.parametrize("dtype,ctype", [("float64", "double"), ("int32", "int32_t"), ("int8", "int8_t")])
def test_dtypes(dtype, ctype):
    k = K.build(K.vadd_static(dtype=dtype, ctype=ctype), out_idx=[2])
    tdt = getattr(torch, dtype)
    a = torch.arange(16).to(tdt)
    assert torch.equal(k(a, a), a + a)


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1000, 100_000])
def test_dynamic_add(n):
    k = K.build(K.vadd_dynamic())
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    k(a, b, c)
    torch.testing.assert_close(c, a + b)


def test_dynamic_add_out_idx():
    k = K.build(K.vadd_dynamic(), out_idx=[2])
    for n in (5, 300, 7):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(k(a, b), a + b)


def test_output_shape_expression():
    k = K.build(K.pad2(), out_idx=[1])
    a = torch.randn(9)
    out = k(a)
    assert out.shape == (11,)
    torch.testing.assert_close(out, torch.nn.functional.pad(a, (1, 1)))


def test_output_shape_expression_checked_when_passed():
    k = K.build(K.pad2())
    a, out = torch.randn(6), torch.empty(8)
    k(a, out)
    torch.testing.assert_close(out, torch.nn.functional.pad(a, (1, 1)))
    with pytest.raises(ValueError, match=r"^pad2\(\) argument 'Out' \(#1\): expected shape\[0\] == n \+ 2 = 8, got 7$"):
        k(a, torch.empty(7))


def test_blocked_matmul_parallel_blocks():
    k = K.build(K.matmul_blocked(), out_idx=[2])
    for m, n, kk in ((64, 48, 32), (37, 5, 19), (1, 1, 1)):
        a, b = torch.randn(m, kk), torch.randn(kk, n)
        torch.testing.assert_close(k(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_scalars_float_int_bool():
    k = K.build(K.axpy())
    x, y = torch.randn(8), torch.randn(8)
    y0 = y.clone()
    k(x, y, 2.5, 8, False)
    torch.testing.assert_close(y, 2.5 * x + y0)
    y1 = y.clone()
    k(x, y, 2, 4, True)  # an int is accepted for a float scalar
    torch.testing.assert_close(y[:4], -2 * x[:4] + y1[:4])
    torch.testing.assert_close(y[4:], y1[4:])


def test_symbol_bound_from_scalar():
    k = K.build(K.scaled_by_scalar_symbol())
    a = torch.zeros(5)
    k(a, 5, 3.0)
    assert torch.equal(a, torch.full((5,), 3.0))
    with pytest.raises(ValueError, match=r"^fill\(\) argument 'n' \(#1\): value binds symbol 'n' = 4, but argument 'A' bound it to 5$"):
        k(a, 4, 1.0)


def test_two_outputs_returns_list():
    k = K.build(K.two_outputs(), out_idx=[2, 3])
    a, b = torch.randn(10), torch.randn(10)
    s, d = k(a, b)
    torch.testing.assert_close(s, a + b)
    torch.testing.assert_close(d, a - b)


def test_noncontiguous_offset_views_are_read_correctly():
    k = K.build(K.vadd_static(), out_idx=[2])
    base = torch.randn(40)
    a, b = base[3:19], base[20:36]  # contiguous views with a storage offset
    torch.testing.assert_close(k(a, b), a + b)


def test_requires_grad_and_parameter_are_accepted():
    k = K.build(K.vadd_static(), out_idx=[2])
    a = torch.nn.Parameter(torch.randn(16))
    b = torch.randn(16, requires_grad=True)
    torch.testing.assert_close(k(a, b), (a + b).detach())


def test_kernel_error_code_raises():
    k = K.build(K.failing_kernel())
    with pytest.raises(RuntimeError, match=r"bad\(\) failed: the kernel returned error code 7"):
        k(torch.zeros(4))


def test_stream_keyword_is_accepted_on_cpu():
    k = K.build(K.vadd_static(), out_idx=[2])
    a = torch.randn(16)
    torch.testing.assert_close(k(a, a, stream=None), a + a)


def test_threads_call_concurrently():
    k = K.build(K.vadd_dynamic(), out_idx=[2])
    errors = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        for n in range(1, 200, 7):
            a, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
            if not torch.equal(k(a, b), a + b):
                errors.append(n)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


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
