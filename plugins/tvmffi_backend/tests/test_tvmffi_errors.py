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
