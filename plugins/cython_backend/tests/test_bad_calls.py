"""Bad calls specific to the cython dispatcher (the documented error table itself is checked by the
conformance suite, test_conformance.py): stride-0 and size-1 strides, a CUDA plan's device check,
nothing written on a refused call, complex conjugate views."""

from __future__ import annotations

import pytest
import torch
from tilelang_core.artifact import BuildOptions

import kernels as K


@pytest.fixture(scope="module")
def vadd():
    return K.build(K.vadd_static())


@pytest.fixture(scope="module")
def mm():
    return K.build(K.matmul_blocked())


def raises(exc, message, fn, *args, **kwargs):
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert type(info.value) is exc
    assert str(info.value) == message
    return info.value


T = lambda *shape, **kw: torch.zeros(*shape, **kw)  # noqa: E731


def test_contiguity(vadd, mm):
    raises(ValueError, "vadd() argument 'A' (#0): expected a contiguous tensor, got strides (2,); call .contiguous()",
           vadd, T(32)[::2], T(16), T(16))
    raises(ValueError, "mm() argument 'B' (#1): expected a contiguous tensor, got strides (1, 4); call .contiguous()",
           mm, T(3, 4), T(5, 4).t(), T(3, 5))
    raises(ValueError, "vadd() argument 'B' (#1): expected a contiguous tensor, got strides (0,); call .contiguous()",
           vadd, T(16), T(1).expand(16), T(16))
    # size-1 dims may carry any stride, as in torch's is_contiguous
    mm(T(1, 4), T(4, 5), T(1, 5).t().contiguous().t())


def test_device_mismatch_with_mock_cuda_plan(vadd, tmp_path):
    """Mock: a CUDA call plan on top of a CPU library (the entry is never reached), to check the
    device test without a GPU."""
    from tilelang_backend_cython.backend import kernel_from_plan
    from tilelang_backend_cython.plan import make_plan

    art = K.vadd_static()
    art = art.replace(target="cuda", target_kind="cuda")
    plan = make_plan(art, BuildOptions())
    lib = tmp_path / "vadd.so"
    lib.write_bytes(vadd.meta["library_data"])  # the build's own file is gone once loaded
    k = kernel_from_plan(plan, lib)
    raises(ValueError, "vadd() argument 'A' (#0): expected a tensor on cuda, got cpu", k, T(16), T(16), T(16))


def test_nothing_is_written_on_a_bad_call():
    k = K.build(K.vadd_static())
    a, b, c = torch.ones(16), torch.ones(16), torch.zeros(16)
    with pytest.raises(ValueError):
        k(a, b.double(), c)
    assert torch.equal(c, torch.zeros(16))


def test_complex_lazy_conjugate_view_is_refused():
    """DLPack cannot describe torch's lazy conjugate views: a complex kernel refuses them."""
    k = K.build(K.complex_copy(), out_idx=[1])
    a = torch.randn(4, dtype=torch.complex64)
    assert torch.equal(k(a), a)
    assert torch.equal(k(a.conj().resolve_conj()), a.conj())
    raises(ValueError, "ccopy() argument 'A' (#0): expected a tensor with its data materialized, got a lazy "
           "conjugate view; call .resolve_conj()", k, a.conj())
