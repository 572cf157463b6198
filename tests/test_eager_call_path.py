"""The call path of an eager ``@tilelang.jit`` function (jit/eager.py, ``EagerFunction.__call__``).

Every call specialised the function again (ran its prologue, built TVM declarations for its
tensors, bound its ``T.const`` values) before finding its kernel: about 110 us a call for two
tensors (upstream's eager_jit notebook times this). A positional call like one seen before now
goes straight to its kernel. These tests check that it does, and that what must still differ
does: new shapes or strides (new constants), other compile-time values, wrong calls."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.jit.eager import EagerFunction


@tilelang.jit
def scale_rows(A, factor):
    M, N = T.const("M, N")
    A: T.Tensor[[M, N], T.float32]
    B = T.empty((M, N), T.float32)
    with T.Kernel(M) as bx:
        for j in T.serial(N):
            B[bx, j] = A[bx, j] * factor
    return B


@tilelang.jit
def iota(m: T.int32):
    B = T.empty([m], T.float32)
    with T.Kernel(1):
        for i in T.serial(m):
            B[i] = T.Cast("float32", i)
    return B


@tilelang.jit
def scale_by(A, s: T.float32 = 1.5):
    N = T.const("N")
    A: T.Tensor[(N,), T.float32]
    B = T.empty((N,), T.float32)
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(N):
            B[i] = A[i] * s
    return B


def count_specialisations(monkeypatch) -> list:
    calls: list = []
    original = EagerFunction._specialise

    def counting(self, args, kwargs, *rest):
        calls.append(args)
        return original(self, args, kwargs, *rest)

    monkeypatch.setattr(EagerFunction, "_specialise", counting)
    return calls


def test_a_call_like_an_earlier_one_does_not_specialise_again(monkeypatch):
    calls = count_specialisations(monkeypatch)
    a = torch.randn(4, 6)
    for _ in range(5):
        assert torch.equal(scale_rows(a, 2.0), a * 2.0)
    assert len(calls) == 1
    b = torch.randn(3, 5)  # other constants: specialised (and compiled) once more
    assert torch.equal(scale_rows(b, 2.0), b * 2.0) and torch.equal(scale_rows(b, 2.0), b * 2.0)
    assert torch.equal(scale_rows(a, 3.0), a * 3.0)  # another compile-time value
    assert torch.equal(scale_rows(a, 3), a * 3)  # another type of value: its own kernel
    assert len(calls) == 4


def test_a_wrong_call_after_a_good_one_is_still_refused():
    a = torch.randn(4, 6)
    scale_rows(a, 2.0)
    with pytest.raises(ValueError, match="expected dtype float32, got float64"):
        scale_rows(a.double(), 2.0)
    with pytest.raises(ValueError, match="contiguous"):
        scale_rows(torch.randn(6, 4).t(), 2.0)  # other strides: the full path, whose checks refuse it


def test_a_scalar_kernel_parameter_is_passed_at_each_call_without_a_new_entry(monkeypatch):
    calls = count_specialisations(monkeypatch)
    for m in (3, 7, 5, 7):
        assert torch.equal(iota(m), torch.arange(m, dtype=torch.float32))
    assert len(calls) == 1 and len(iota._eager_function()._calls) == 1


def test_a_call_leaving_a_scalar_to_its_default_does_not_specialise_again(monkeypatch):
    """``scale_by(a)`` took the full path (specialising again) at every call: 146 us against 12."""
    calls = count_specialisations(monkeypatch)
    a = torch.randn(8)
    for _ in range(3):
        assert torch.equal(scale_by(a), a * 1.5)
    assert torch.equal(scale_by(a, 2.0), a * 2.0)  # the scalar given: passed, not the default
    assert torch.equal(scale_by(a), a * 1.5)
    assert len(calls) == 2, calls


def test_a_keyword_call_like_an_earlier_call_does_not_specialise_again(monkeypatch):
    """A call with keyword arguments took the full path (specialising again) at every call:
    130-165 us against 6-13 us for the positional call of the same kernel."""
    calls = count_specialisations(monkeypatch)
    a = torch.randn(7, 3)  # a shape no other test calls with
    assert torch.equal(scale_rows(a, 2.0), a * 2.0)
    for _ in range(3):  # binds as scale_rows(a, 2.0): its kernel, without specialising
        assert torch.equal(scale_rows(a, factor=2.0), a * 2.0)
        assert torch.equal(scale_rows(A=a, factor=2.0), a * 2.0)
        assert torch.equal(scale_rows(factor=2.0, A=a), a * 2.0)
    assert len(calls) == 1, calls
    v = torch.randn(9)
    for _ in range(3):  # a scalar kernel parameter by name, or left to its default (s=1.5)
        assert torch.equal(scale_by(A=v), v * 1.5)
        assert torch.equal(scale_by(v, s=3.0), v * 3.0)
        assert torch.equal(scale_by(s=2.0, A=v), v * 2.0)
    assert len(calls) <= 3, calls  # at most once per way of calling, the first time


@pytest.mark.parametrize("call, message", [
    (lambda a: scale_rows(a, factr=2.0), "scale_rows(): got an unexpected keyword argument 'factr'"),
    (lambda a: scale_rows(a, A=a, factor=2.0), "scale_rows(): multiple values for argument 'A'"),
    (lambda a: scale_rows(a, 2.0, factor=2.0), "scale_rows(): multiple values for argument 'factor'"),
    (lambda a: scale_rows(factor=2.0), "scale_rows() missing 1 required argument: 'A'"),
    (lambda a: scale_rows(A=a), "scale_rows(): missing compile-time argument(s) factor"),
])
def test_a_wrong_keyword_call_after_good_ones_says_what_python_says(call, message):
    a = torch.randn(4, 6)
    scale_rows(a, 2.0), scale_rows(a, factor=2.0), scale_rows(A=a, factor=2.0)
    with pytest.raises(TypeError) as info:
        call(a)
    assert str(info.value) == message
