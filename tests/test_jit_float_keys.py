"""A compile-time float of ``-0.0`` or NaN picks its own kernel (jit/binding.py ``special_float``).

``-0.0 == 0.0`` with one hash, so ``@tilelang.jit`` handed out the kernel built for whichever came
first (``x * c`` with ``c = -0.0`` gave ``+0.0``, torch gives ``-0.0``); a NaN equals nothing, so
every call with a new NaN object parsed the kernel again and kept one more.
"""

from __future__ import annotations

import math

import numpy
import torch

import tilelang
import tilelang.language as T
from tilelang_core.jit.binding import special_float

ON_CPU = dict(target="c", execution_backend="cython")


@tilelang.jit(out_idx=-1, **ON_CPU)
def times(N, c):
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(N):
                B[i] = A[i] * c

    return k


@tilelang.jit(**ON_CPU)
def eager_times(X, c):
    N = T.const("N")
    X: T.Tensor[(N,), T.float32]
    factor = c[0] if isinstance(c, tuple) else c  # a number, or one in a tuple
    Y = T.empty((N,), T.float32)
    with T.Kernel(1) as _:
        for i in T.Parallel(N):
            Y[i] = X[i] * factor
    return Y


def _signs(t):
    return [math.copysign(1.0, v) for v in t.tolist()]


def test_zero_and_negative_zero_are_two_kernels_both_ways():
    ones = torch.ones(4)
    for order in ((0.0, -0.0), (-0.0, 0.0)):
        for c in order:
            assert _signs(times(4, c)(ones)) == [math.copysign(1.0, c)] * 4, order
            assert _signs(eager_times(ones, c)) == [math.copysign(1.0, c)] * 4, order
    assert _signs(times(4, numpy.float32(-0.0))(ones)) == [-1.0] * 4


def test_nan_values_share_one_kernel():
    ones = torch.ones(3)
    times(3, float("nan"))
    eager_times(ones, float("nan"))
    calls = eager_times._eager_function()._calls  # positional calls seen: the eager fast path's keys
    counts = len(times.kernels), len(eager_times.kernels), len(calls)
    for _ in range(3):
        assert times(3, float("nan"))(ones).isnan().all()
        assert eager_times(ones, float("nan")).isnan().all()
    assert (len(times.kernels), len(eager_times.kernels), len(calls)) == counts


def test_special_float_leaves_other_values_alone():
    assert special_float(0.0) is None and special_float(1.5) is None and special_float(0) is None
    assert special_float(-0.0) == special_float(numpy.float64(-0.0)) == ("float", "-0.0")
    assert special_float(float("nan")) == special_float(numpy.float32("nan")) == ("float", "nan")


def test_the_eager_fast_path_keys_tell_zero_signs_and_value_types_apart():
    """Positional calls reuse the kernel of an earlier call with the same key: ``(0.0,)`` and
    ``(-0.0,)``, NumPy's ``0.0`` and ``-0.0``, ``(2,)`` and ``(2.0,)`` compare equal but build
    other kernels (they shared one on this path; the keyword path was right: found by a hunt)."""
    ones = torch.ones(2)
    for value in ((0.0,), (-0.0,), numpy.float64(0.0), numpy.float64(-0.0)):
        sign = math.copysign(1.0, value[0] if isinstance(value, tuple) else float(value))
        assert _signs(eager_times(ones, value)) == [sign] * 2, value
    kernels = len(eager_times.kernels)
    eager_times(ones, (2,))
    eager_times(ones, (2.0,))  # an int and a float constant: two kernels (X[i] * 2 of an int X wraps in int32)
    assert len(eager_times.kernels) == kernels + 2
    calls = len(eager_times._eager_function()._calls)
    for _ in range(5):
        eager_times(ones, (float("nan"),))
    assert len(eager_times._eager_function()._calls) == calls + 1  # every NaN is one key
