"""Every class of bad call from the contract raises TypeError/ValueError with its exact message."""

from __future__ import annotations

import re

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


@pytest.fixture(scope="module")
def axpy():
    return K.build(K.axpy())


def raises(exc, message, fn, *args, **kwargs):
    with pytest.raises(exc) as info:
        fn(*args, **kwargs)
    assert type(info.value) is exc
    assert str(info.value) == message
    return info.value


T = lambda *shape, **kw: torch.zeros(*shape, **kw)  # noqa: E731


def test_wrong_count(vadd):
    raises(TypeError, "vadd() takes 3 tensor/scalar arguments (A, B, C), got 2", vadd, T(16), T(16))
    raises(TypeError, "vadd() takes 3 tensor/scalar arguments (A, B, C), got 4", vadd, T(16), T(16), T(16), T(16))
    raises(TypeError, "vadd() takes 3 tensor/scalar arguments (A, B, C), got 0", vadd)


def test_wrong_count_excludes_outputs():
    k = K.build(K.vadd_static(), out_idx=[2])
    raises(TypeError, "vadd() takes 2 tensor/scalar arguments (A, B), got 3", k, T(16), T(16), T(16))


def test_not_a_tensor(vadd):
    raises(TypeError, "vadd() argument 'B' (#1): expected a torch.Tensor, got list", vadd, T(16), [0.0] * 16, T(16))
    raises(TypeError, "vadd() argument 'A' (#0): expected a torch.Tensor, got ndarray", vadd, T(16).numpy(), T(16), T(16))
    raises(TypeError, "vadd() argument 'C' (#2): expected a torch.Tensor, got float", vadd, T(16), T(16), 1.0)


def test_none(vadd):
    raises(TypeError, "vadd() argument 'A' (#0): expected a torch.Tensor, got NoneType", vadd, None, T(16), T(16))


def test_dtype(vadd):
    raises(ValueError, "vadd() argument 'A' (#0): expected dtype float32, got float16", vadd,
           T(16, dtype=torch.float16), T(16), T(16))
    raises(ValueError, "vadd() argument 'C' (#2): expected dtype float32, got bfloat16", vadd,
           T(16), T(16), T(16, dtype=torch.bfloat16))
    raises(ValueError, "vadd() argument 'B' (#1): expected dtype float32, got int64", vadd,
           T(16), T(16, dtype=torch.int64), T(16))
    raises(ValueError, "vadd() argument 'B' (#1): expected dtype float32, got bool", vadd,
           T(16), T(16, dtype=torch.bool), T(16))


def test_ndim(vadd, mm):
    raises(ValueError, "vadd() argument 'B' (#1): expected 1 dimensions, got 2", vadd, T(16), T(4, 4), T(16))
    raises(ValueError, "mm() argument 'A' (#0): expected 2 dimensions, got 3", mm, T(2, 3, 4), T(4, 5), T(3, 5))
    raises(ValueError, "mm() argument 'A' (#0): expected 2 dimensions, got 0", mm, torch.tensor(1.0), T(4, 5), T(3, 5))


def test_static_dim():
    k = K.build(K.artifact("s2", [K.tensor("X", [4, 64])], [K.ptr("X", 0)],
                           "#include <stdint.h>\nint32_t s2(float *X) { (void)X; return 0; }\n"))
    raises(ValueError, "s2() argument 'X' (#0): expected shape[1] == 64, got 63", k, T(4, 63))
    raises(ValueError, "s2() argument 'X' (#0): expected shape[0] == 4, got 5", k, T(5, 64))


def test_contiguity(vadd, mm):
    raises(ValueError, "vadd() argument 'A' (#0): expected a contiguous tensor, got strides (2,); call .contiguous()",
           vadd, T(32)[::2], T(16), T(16))
    raises(ValueError, "mm() argument 'B' (#1): expected a contiguous tensor, got strides (1, 4); call .contiguous()",
           mm, T(3, 4), T(5, 4).t(), T(3, 5))
    raises(ValueError, "vadd() argument 'B' (#1): expected a contiguous tensor, got strides (0,); call .contiguous()",
           vadd, T(16), T(1).expand(16), T(16))
    # size-1 dims may carry any stride, as in torch's is_contiguous
    mm(T(1, 4), T(4, 5), T(1, 5).t().contiguous().t())


def test_symbol_clash(mm):
    raises(ValueError, "mm() argument 'B' (#1): shape[0] binds symbol 'K' = 7, but argument 'A' bound it to 8",
           mm, T(3, 8), T(7, 5), T(3, 5))
    raises(ValueError, "mm() argument 'C' (#2): shape[1] binds symbol 'N' = 6, but argument 'B' bound it to 5",
           mm, T(3, 8), T(8, 5), T(3, 6))


def test_scalar(axpy):
    x, y = T(8), T(8)
    raises(TypeError, "axpy() argument 'count' (#3): expected an int, got str", axpy, x, y, 1.0, "8", True)
    raises(TypeError, "axpy() argument 'count' (#3): expected an int, got float", axpy, x, y, 1.0, 8.0, True)
    raises(TypeError, "axpy() argument 'alpha' (#2): expected a float, got str", axpy, x, y, "1", 8, True)
    raises(TypeError, "axpy() argument 'alpha' (#2): expected a float, got NoneType", axpy, x, y, None, 8, True)
    raises(TypeError, "axpy() argument 'negate' (#4): expected a bool, got str", axpy, x, y, 1.0, 8, "no")
    raises(ValueError, "axpy() argument 'count' (#3): value 4294967296 does not fit in int32", axpy, x, y, 1.0, 2**32, False)
    raises(ValueError, "axpy() argument 'count' (#3): value 100000000000000000000000 does not fit in int32", axpy,
           x, y, 1.0, 10**23, False)
    raises(ValueError, "axpy() argument 'negate' (#4): expected a bool (True/False, 0 or 1), got 2", axpy, x, y, 1.0, 8, 2)
    raises(TypeError, "axpy() argument 'X' (#0): expected a torch.Tensor, got int", axpy, 1, y, 1.0, 8, True)
    raises(TypeError, "axpy() argument 'count' (#3): expected an int, got Tensor", axpy, x, y, 1.0, torch.tensor(8), True)


def test_device_meta_tensor(vadd):
    raises(ValueError, "vadd() argument 'B' (#1): expected a tensor on cpu, got meta", vadd,
           T(16), T(16, device="meta"), T(16))


def test_sparse_tensor(vadd):
    raises(ValueError, "vadd() argument 'A' (#0): expected a dense (strided) tensor, got layout torch.sparse_coo; "
           "call .to_dense()", vadd, T(16).to_sparse(), T(16), T(16))


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


def test_unknown_keyword(vadd):
    raises(TypeError, "vadd() got an unexpected keyword argument 'out' (only 'stream' is accepted)", vadd,
           T(16), T(16), T(16), out=T(16))


def test_nothing_is_written_on_a_bad_call():
    k = K.build(K.vadd_static())
    a, b, c = torch.ones(16), torch.ones(16), torch.zeros(16)
    with pytest.raises(ValueError):
        k(a, b.double(), c)
    assert torch.equal(c, torch.zeros(16))


def test_messages_name_the_parameter_in_every_error(mm):
    for args in [(T(3, 8), "x", T(3, 5)), (T(3, 8), T(8, 5, dtype=torch.int32), T(3, 5)), (T(3, 8), T(8, 5), None)]:
        with pytest.raises((TypeError, ValueError)) as info:
            mm(*args)
        assert re.match(r"mm\(\) argument '(A|B|C)' \(#\d\): ", str(info.value))


def test_explicit_strides():
    """A parameter with required strides (column-major X of shape (n, 4)): checked as a tuple;
    size-1 dimensions may carry any stride."""
    k = K.build(K.colmajor())
    k(T(4, 5).t())  # shape (5, 4), strides (1, 5)
    k(T(4, 1).t())  # n == 1: the stride of dim 0 is free
    raises(ValueError, "colmajor() argument 'X' (#0): expected strides (1, 5), got strides (4, 1)", k, T(5, 4))


def test_complex_lazy_conjugate_view_is_refused():
    """DLPack cannot describe torch's lazy conjugate views: a complex kernel refuses them."""
    k = K.build(K.complex_copy(), out_idx=[1])
    a = torch.randn(4, dtype=torch.complex64)
    assert torch.equal(k(a), a)
    assert torch.equal(k(a.conj().resolve_conj()), a.conj())
    raises(ValueError, "ccopy() argument 'A' (#0): expected a tensor with its data materialized, got a lazy "
           "conjugate view; call .resolve_conj()", k, a.conj())
