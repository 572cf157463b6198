"""Bad calls raise the contract's TypeError/ValueError messages (docs/backend-conventions.md).

The messages are the same whichever backend runs; TVM's own argument errors are translated.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from _tvmffi_helpers import build

from tilelang_backend_tvmffi.testing import sum_kernel


@pytest.fixture(scope="module")
def sum3():
    return sum_kernel(3)


@pytest.fixture(scope="module")
def scale_add():
    return build("scale_add")


@pytest.fixture(scope="module")
def scale_add_out():
    return build("scale_add", out_idx=[2])


def _raises(exc_type, message, fn, *args, **kwargs):
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert type(info.value) is exc_type
    assert str(info.value) == message
    return info.value


def f32(*shape):
    return torch.randn(*shape)


def test_wrong_count(sum3, scale_add_out):
    _raises(TypeError, "sum3() takes 3 tensor/scalar arguments (x0, x1, out), got 2", sum3, f32(16), f32(16))
    _raises(TypeError, "sum3() takes 3 tensor/scalar arguments (x0, x1, out), got 4",
            sum3, f32(16), f32(16), f32(16), f32(16))
    _raises(TypeError, "scale_add() takes 3 tensor/scalar arguments (A, B, alpha), got 4",
            scale_add_out, f32(2, 4), f32(2, 4), f32(2, 4), 1.0)


@pytest.mark.parametrize(
    "value, type_name",
    [(np.zeros(16, np.float32), "ndarray"), (None, "NoneType"), (3, "int"), ([1.0] * 16, "list")],
)
def test_not_a_tensor(sum3, value, type_name):
    _raises(TypeError, f"sum3() argument 'x1' (#1): expected a torch.Tensor, got {type_name}",
            sum3, f32(16), value, f32(16))


def test_dtype(sum3):
    _raises(ValueError, "sum3() argument 'x0' (#0): expected dtype float32, got float16",
            sum3, f32(16).half(), f32(16), f32(16))
    _raises(ValueError, "sum3() argument 'out' (#2): expected dtype float32, got int64",
            sum3, f32(16), f32(16), torch.zeros(16, dtype=torch.int64))


def test_ndim(sum3, scale_add):
    _raises(ValueError, "sum3() argument 'x0' (#0): expected 1 dimensions, got 2", sum3, f32(4, 4), f32(16), f32(16))
    _raises(ValueError, "scale_add() argument 'B' (#1): expected 2 dimensions, got 3",
            scale_add, f32(2, 4), f32(2, 4, 1), f32(2, 4), 1.0)


def test_static_dim(sum3, scale_add):
    _raises(ValueError, "sum3() argument 'x1' (#1): expected shape[0] == 16, got 15", sum3, f32(16), f32(15), f32(16))
    _raises(ValueError, "scale_add() argument 'A' (#0): expected shape[1] == 4, got 3",
            scale_add, f32(2, 3), f32(2, 4), f32(2, 4), 1.0)


def test_device(sum3):
    """A 'meta' tensor stands in for a tensor on the wrong device (no GPU here)."""
    meta = torch.empty(16, device="meta")
    _raises(ValueError, "sum3() argument 'x0' (#0): expected a tensor on cpu, got meta", sum3, meta, f32(16), f32(16))


def test_contiguity(sum3, scale_add):
    _raises(ValueError,
            "sum3() argument 'x0' (#0): expected a contiguous tensor, got strides (2,); call .contiguous()",
            sum3, f32(32)[::2], f32(16), f32(16))
    _raises(ValueError,
            "scale_add() argument 'C' (#2): expected a contiguous tensor, got strides (1, 4); call .contiguous()",
            scale_add, f32(4, 4), f32(4, 4), f32(4, 4).t(), 1.0)


def test_symbol_clash(scale_add, scale_add_out):
    _raises(ValueError,
            "scale_add() argument 'B' (#1): shape[0] binds symbol 'n' = 7, but argument 'A' bound it to 8",
            scale_add, f32(8, 4), f32(7, 4), f32(8, 4), 1.0)
    _raises(ValueError,
            "scale_add() argument 'C' (#2): shape[0] binds symbol 'n' = 9, but argument 'A' bound it to 8",
            scale_add, f32(8, 4), f32(8, 4), f32(9, 4), 1.0)
    _raises(ValueError,
            "scale_add() argument 'B' (#1): shape[0] binds symbol 'n' = 7, but argument 'A' bound it to 8",
            scale_add_out, f32(8, 4), f32(7, 4), 1.0)


def test_scalar(scale_add, scale_add_out):
    _raises(TypeError, "scale_add() argument 'alpha' (#3): expected a float, got str",
            scale_add, f32(2, 4), f32(2, 4), f32(2, 4), "x")
    _raises(TypeError, "scale_add() argument 'alpha' (#2): expected a float, got Tensor",
            scale_add_out, f32(2, 4), f32(2, 4), torch.tensor(1.0))
    iota = build("iota", out_idx=[1])
    _raises(TypeError, "iota() argument 'm' (#0): expected an int, got str", iota, "3")


def test_scalar_conversions_and_ranges(scale_add_out):
    """Same rules as the cython backend: __float__/__index__ objects accepted, ranges checked."""
    a, b = f32(2, 4), f32(2, 4)
    torch.testing.assert_close(scale_add_out(a, b, np.float32(2.0)), a + 2 * b)
    torch.testing.assert_close(scale_add_out(a, b, True), a + b)
    iota = build("iota", out_idx=[1])
    torch.testing.assert_close(iota(np.int64(4)), torch.arange(4, dtype=torch.int32) * 3)
    _raises(ValueError, "iota() argument 'm' (#0): value 4294967296 does not fit in int32", iota, 2**32)
    _raises(ValueError, "iota() argument 'm' (#0): gives symbol 'm' = -1, but a dimension cannot be negative",
            iota, -1)


def test_sparse_and_meta_tensors(sum3):
    _raises(ValueError,
            "sum3() argument 'x0' (#0): expected a dense (strided) tensor, got layout torch.sparse_coo; call .to_dense()",
            sum3, f32(16).to_sparse(), f32(16), f32(16))
    _raises(ValueError, "sum3() argument 'x1' (#1): expected a tensor on cpu, got meta",
            sum3, f32(16), torch.empty(3, 3, device="meta"), f32(16))


def test_bad_stream_type(sum3):
    _raises(TypeError,
            "sum3() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, got str",
            sum3, f32(16), f32(16), f32(16), stream="s")


def test_first_bad_argument_is_reported(sum3):
    _raises(ValueError, "sum3() argument 'x0' (#0): expected dtype float32, got float64",
            sum3, f32(16).double(), f32(3), None)


def test_errors_do_not_leave_the_kernel_broken(scale_add_out):
    with pytest.raises(ValueError):
        scale_add_out(f32(3, 4), f32(4, 4), 1.0)
    a, b = f32(3, 4), f32(3, 4)
    torch.testing.assert_close(scale_add_out(a, b, 1.0), a + b)


def test_bad_stream_type_on_cpu_is_ignored_but_errors_still_reported(scale_add_out):
    with pytest.raises(ValueError, match=re.escape("expected 2 dimensions, got 1")):
        scale_add_out(f32(3), f32(3, 4), 1.0, stream=0)
