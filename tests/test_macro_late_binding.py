"""``T.macro`` binds the names its body uses when it is expanded, as Python and TileLang do.

The macro used to snapshot its module's globals and closure when the decorator ran
(TVMScript's hygienic capture), so:

* a global rebound after the ``def`` kept its old value: the kernel silently computed ``A * 2``
  after ``SCALE = 3.0``;
* a macro calling a macro defined further down the module stopped with "Undefined variable: inner";
* a macro calling itself (recursion on a Python-level depth) stopped with "Undefined variable: rec".

Also: a ``return`` inside a TIR ``if``/``for`` of a macro compiled into a kernel that failed at
run time ("returned error code 3") or stopped with an empty ``DiagnosticError: error:``; it is now a
``KernelDefinitionError`` naming its line, and a ``return`` among the macro's top-level statements
ends the macro, as in Python.
"""

from __future__ import annotations

import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError

N = 8
BACKENDS = [("c", "cython"), ("llvm", "tvm_ffi")]

SCALE = 2.0


@T.macro
def scaled(x):
    return x * SCALE


SCALE = 3.0  # rebound after the macro: the kernels below see 3.0


@T.macro
def outer(B, i):
    inner(B, i)  # defined further down the module
    B[i] = B[i] * 2.0


@T.macro
def inner(B, i):
    B[i] = B[i] + 1.0


@T.macro
def rec(B, i, depth):
    if depth > 0:  # a Python int: chosen when the kernel is parsed
        B[i] = B[i] + 1.0
        rec(B, i, depth - 1)


@T.macro
def clamp_in_if(x):
    if x > 3.0:
        return 3.0
    return x


@T.macro
def return_in_for(B, i):
    for j in T.serial(2):
        B[i] = B[i] + j
        return


@T.macro
def early_exit(B, i):
    B[i] = B[i] + 1.0
    return
    B[i] = 99.0  # noqa: unreachable - never expanded, as in Python


@T.macro
def flagged(x, flag):
    if flag:  # a Python value: the return below is reached only when flag is true
        return x + 100.0
    return x + 1.0


def _compile(func, target, backend):
    return tilelang.compile(func, target=target, execution_backend=backend)


def _map_kernel(fn):
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                C[i] = fn(A[i])

    return k


def _run_map(func, target, backend):
    a = torch.arange(N, dtype=torch.float32)
    c = torch.zeros(N, dtype=torch.float32)
    _compile(func, target, backend)(a, c)
    return a, c


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_global_rebound_after_the_macro_is_read_when_the_kernel_is_parsed(target, backend):
    a, c = _run_map(_map_kernel(scaled), target, backend)
    torch.testing.assert_close(c, a * 3.0)  # was a * 2.0: the value when @T.macro ran


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_each_kernel_sees_the_global_as_it_is_when_that_kernel_is_parsed(target, backend, monkeypatch):
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "SCALE", 5.0)
    five = _map_kernel(scaled)
    monkeypatch.setattr(module, "SCALE", 7.0)
    seven = _map_kernel(scaled)
    a, c5 = _run_map(five, target, backend)
    _, c7 = _run_map(seven, target, backend)
    torch.testing.assert_close(c5, a * 5.0)
    torch.testing.assert_close(c7, a * 7.0)


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_macro_calls_a_macro_defined_further_down_and_itself(target, backend):
    @T.prim_func
    def k(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                outer(A, i)
                rec(A, i, 3)

    a = torch.arange(N, dtype=torch.float32)
    expected = (a + 1.0) * 2.0 + 3.0
    _compile(k, target, backend)(a)
    torch.testing.assert_close(a, expected)


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_closure_cells_are_read_at_expansion(target, backend):
    def make():
        factor = 2.0

        @T.macro
        def first(x):
            return second(x) * factor  # both bound below, after this def

        @T.macro
        def second(x):
            return x + 1.0

        factor = 4.0
        return _map_kernel(first)

    a, c = _run_map(make(), target, backend)
    torch.testing.assert_close(c, (a + 1.0) * 4.0)


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_parameter_still_hides_a_global_of_its_name(target, backend):
    # ``N`` is a module global; the macro's parameter of that name wins, as in Python
    @T.macro
    def add_n(x, N):
        return x + N

    a, c = _run_map(_map_kernel(lambda x: add_n(x, 10.0)), target, backend)
    torch.testing.assert_close(c, a + 10.0)


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_top_level_return_ends_the_macro(target, backend):
    @T.prim_func
    def k(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                early_exit(A, i)

    a = torch.arange(N, dtype=torch.float32)
    expected = a + 1.0
    _compile(k, target, backend)(a)
    torch.testing.assert_close(a, expected)


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_return_in_a_python_branch_ends_the_macro_when_taken(target, backend):
    """An ``if`` on a Python value is decided when the kernel is parsed, so its ``return`` ends the
    macro, as in TileLang (DeepSeek's TileKernels: ``if not round_sf: return sf, ...``); it was
    refused when the branch was taken."""
    a, c = _run_map(_map_kernel(lambda x: flagged(x, False)), target, backend)
    torch.testing.assert_close(c, a + 1.0)
    a, c = _run_map(_map_kernel(lambda x: flagged(x, True)), target, backend)
    torch.testing.assert_close(c, a + 100.0)


@T.macro
def scale_and_inverse(x, mode):
    s = x * 0.5
    if mode == "plain":
        return s, 1.0
    elif mode == "pow2":  # an elif chain of Python values, returning a tuple of an expression and a number
        if x is None:
            return None
        return T.exp2(T.ceil(T.log2(s))), 2.0
    return s * 3.0, 3.0


def test_python_branches_choose_among_returns_of_tuples():
    def kernel(mode):
        def body(x):
            value, weight = scale_and_inverse(x, mode)
            return value * weight
        return _map_kernel(body)

    for mode, ref in (("plain", lambda a: a * 0.5), ("pow2", lambda a: torch.exp2(torch.ceil(torch.log2(a * 0.5))) * 2),
                      ("other", lambda a: a * 0.5 * 3 * 3)):
        a, c = _run_map(kernel(mode), "c", "cython")
        torch.testing.assert_close(c, ref(a))


@T.macro
def doubled_if_long(x, n):
    if n > 2:  # n = A.shape[0] of a static shape: a TIR constant, decided when the kernel is parsed
        return x * 2.0
    return x


def test_a_return_under_a_constant_tir_condition_ends_the_macro():
    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                C[i] = doubled_if_long(A[i], A.shape[0])

    a, c = _run_map(k, "c", "cython")
    torch.testing.assert_close(c, a * 2.0 if N > 2 else a)


def test_a_return_inside_a_tir_if_names_its_line():
    line = clamp_in_if.__wrapped__.__code__.co_firstlineno + 3  # the decorator line + 3
    with pytest.raises(KernelDefinitionError,
                       match=rf"test_macro_late_binding\.py:{line}: a return inside a loop, a with block or an if on a "
                             r"run-time value of macro 'clamp_in_if' is not supported \(one inside an if on a Python "
                             r"value is\): assign to a T\.alloc_var and return it after the branch"):
        _map_kernel(clamp_in_if)


def test_a_return_inside_a_for_names_its_line():
    line = return_in_for.__wrapped__.__code__.co_firstlineno + 4
    with pytest.raises(KernelDefinitionError, match=rf"\.py:{line}: a return inside a loop, .* of macro 'return_in_for'"):
        @T.prim_func
        def k(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                for i in T.serial(N):
                    return_in_for(A, i)


def test_an_expansion_does_not_read_the_source_of_every_frame(monkeypatch):
    """Each expansion walked the stack with ``inspect.getouterframes``, which reads the source of
    every frame: parsing a kernel with 200 macro calls took 5 s (now 0.3 s)."""
    import inspect

    def refuse(*args, **kwargs):
        raise AssertionError("inspect.getouterframes called while expanding a macro")

    monkeypatch.setattr(inspect, "getouterframes", refuse)
    a, c = _run_map(_map_kernel(scaled), "c", "cython")
    torch.testing.assert_close(c, a * 3.0)
