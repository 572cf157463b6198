"""A compile-time float of ``-0.0`` or NaN picks its own kernel (jit/binding.py ``special_float``).

``-0.0 == 0.0`` with one hash, so ``@tilelang.jit`` handed out the kernel built for whichever came
first (``x * c`` with ``c = -0.0`` gave ``+0.0``, torch gives ``-0.0``); a NaN equals nothing, so
every call with a new NaN object parsed the kernel again and kept one more.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

import numpy
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.jit.binding import cache_value, special_float

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


class Pair(typing.NamedTuple):
    c: Any
    unused: int = 0


@dataclasses.dataclass(frozen=True)
class Frozen:
    c: Any


def _inner(holder):
    """The number a holder carries: a NamedTuple's or dataclass's ``c``, a frozenset's one member."""
    return next(iter(holder)) if isinstance(holder, frozenset) else holder.c


@tilelang.jit(out_idx=-1, **ON_CPU)
def times_inner(N, holder):
    c = _inner(holder)

    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(N):
                B[i] = A[i] * c

    return k


@tilelang.jit(**ON_CPU)
def eager_times_inner(X, holder):
    N = T.const("N")
    X: T.Tensor[(N,), T.int32]
    c = _inner(holder)
    Y = T.empty((N,), T.float32)
    with T.Kernel(1) as _:
        for i in T.Parallel(N):
            Y[i] = X[i] * c
    return Y


HOLDERS = [Pair, Frozen, lambda v: frozenset([v])]


@pytest.mark.parametrize("holder", HOLDERS, ids=["namedtuple", "frozen_dataclass", "frozenset"])
def test_values_inside_namedtuples_dataclasses_and_frozensets_are_keyed_like_top_level_ones(holder):
    """``Pair(-0.0) == Pair(0.0)``, ``Frozen(4) == Frozen(4.0)`` and ``frozenset({-0.0}) ==
    frozenset({0.0})``: each shared the kernel of whichever came first, on the lazy path, the
    eager style's positional fast path and its keyword path (found by a hunt). ``2**30 * 4`` in
    int32 arithmetic wraps to 0; with a float 4.0 it is 2**32."""
    big = torch.full((2,), 2**30, dtype=torch.int32)
    ones = torch.ones(2, dtype=torch.int32)
    for c in (0.0, -0.0):
        assert _signs(times_inner(2, holder(c))(ones)) == [math.copysign(1.0, c)] * 2, c
        assert _signs(eager_times_inner(ones, holder(c))) == [math.copysign(1.0, c)] * 2, c
        assert _signs(eager_times_inner(ones, holder=holder(c))) == [math.copysign(1.0, c)] * 2, c
    for c, want in ((4, 0.0), (4.0, 2.0**32)):
        assert times_inner(2, holder(c))(big).tolist() == [want] * 2, c
        assert eager_times_inner(big, holder(c)).tolist() == [want] * 2, c
        assert eager_times_inner(big, holder=holder(c)).tolist() == [want] * 2, c


def test_a_nan_inside_a_namedtuple_is_one_key():
    """Each call with a NaN inside a NamedTuple kept one more entry in both call caches."""
    ones = torch.ones(2, dtype=torch.int32)
    times_inner(2, Pair(float("nan")))
    eager_times_inner(ones, Pair(float("nan")))
    calls = eager_times_inner._eager_function()._calls
    counts = len(times_inner._call_form_cache), len(calls)
    for _ in range(5):
        assert times_inner(2, Pair(float("nan")))(ones).isnan().all()
        assert eager_times_inner(ones, Pair(float("nan"))).isnan().all()
    assert (len(times_inner._call_form_cache), len(calls)) == counts


def test_two_namedtuple_types_with_equal_fields_are_two_keys():
    """``Pair(1.5, 0) == Other(1.5, 0)`` as tuples, but a builder may read them by field name."""
    Other = typing.NamedTuple("Other", [("unused", int), ("c", Any)])
    assert cache_value(Pair(1.5, 0)) != cache_value(Other(1.5, 0))
    assert cache_value(Pair(1.5, 0)) == cache_value(Pair(1.5, 0))


def test_a_plain_dataclass_stays_unhashable_as_in_tilelang():
    """Only hashable (frozen) dataclasses are keyed by their fields: a plain one is refused by
    ``parse_args`` as TileLang refuses it (upstream's test_lazy_jit_unsupported_unhashable...)."""
    @dataclasses.dataclass
    class Plain:
        c: Any

    with pytest.raises(TypeError, match="Unsupported unhashable JIT compile-time cache key value"):
        cache_value(Plain(1.0))


def test_an_eq_false_dataclass_is_keyed_by_identity():
    """``eq=False`` means two instances with equal fields are different values: keyed by their
    fields (6ec40a7), a kernel built from a non-field attribute was handed to the other one, a
    list field was unhashable and a self-referencing one recursed without end (found by a hunt)."""
    @dataclasses.dataclass(eq=False)
    class Node:
        c: Any
        links: list = dataclasses.field(default_factory=list)

    first, second = Node(1.0), Node(1.0)
    first.links.append(first)  # a cycle, and a list field
    assert cache_value(first) is first and cache_value(second) is second
    assert cache_value(first) != cache_value(second)
