"""Python values where TileLang kernels put them (from a hunt through upstream TileLang's examples):

* ``if value:`` on a plain Python value (``None``, a number, a string, a list) chooses its branch
  by Python's truthiness when the kernel is parsed. TVMScript stopped at anything but a ``bool``
  ("If condition must be a boolean expression, but got None"), which broke upstream's
  convolution autotune example on every machine without CUDA (``is_hopper`` is ``None`` there).
* a ``T.macro`` parameter named like a global defined before the macro (``X = torch.randn(...)``
  then ``def impl(X, ...)``, as a script or notebook does) stopped every call of the macro with
  "Variable X already defined in current scope".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T


def branch_kernel(flag):
    @T.prim_func
    def branch(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            if flag:
                for i in T.serial(8):
                    B[i] = A[i] * 2.0
            else:
                for i in T.serial(8):
                    B[i] = A[i] + 1.0

    return branch


@pytest.mark.parametrize("flag,doubled", [(None, False), (0, False), (0.0, False), ("", False), ([], False), ((), False),
                                          (np.int64(0), False), (1, True), (2.5, True), ("yes", True), ([0], True),
                                          (np.float32(3), True), (True, True), (False, False)],
                         ids=lambda v: repr(v))
def test_a_python_value_chooses_its_branch_by_truthiness(flag, doubled):
    kernel = tilelang.compile(branch_kernel(flag), out_idx=[1], target="c", execution_backend="cython")
    a = torch.randn(8)
    assert torch.equal(kernel(a), a * 2.0 if doubled else a + 1.0)


def test_a_run_time_condition_that_calls_a_macro_is_evaluated_once():
    """The condition is evaluated once and handed to TVMScript's visitor: the macro's store runs once."""

    @T.macro
    def bump(C):
        C[0] = C[0] + 1
        return C[0] > 0

    @T.prim_func
    def count(C: T.Tensor((1,), "int32"), D: T.Tensor((1,), "int32")):
        with T.Kernel(1):
            if bump(C):
                D[0] = 7
            else:
                D[0] = -7

    kernel = tilelang.compile(count, target="c", execution_backend="cython")
    c, d = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    kernel(c, d)
    assert c.item() == 1 and d.item() == 7


def test_an_object_that_is_not_a_plain_value_keeps_tvmscripts_error():
    class Config:
        pass

    with pytest.raises(Exception, match="If condition must be a boolean expression"):
        tilelang.compile(branch_kernel(Config()), out_idx=[1], target="c", execution_backend="cython")


#: A global of the name the macro below gives its first parameter (a script's or notebook's data).
X = torch.arange(64, dtype=torch.float32)


@T.macro
def add_one_impl(X, Y, n):
    with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
        for i in T.Parallel(32):
            Y[bx * 32 + i] = X[bx * 32 + i] + 1


def test_a_macro_parameter_named_like_an_earlier_global_is_the_parameter():
    @T.prim_func
    def add_one(A: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        add_one_impl(A, Y, 64)

    kernel = tilelang.compile(add_one, out_idx=[1], target="c", execution_backend="cython")
    a = torch.randn(64)
    assert torch.equal(kernel(a), a + 1)  # A, not the global X


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_a_number_expression_as_a_condition_is_tested_against_zero(backend, target):
    """``if A[i]:`` with an ``else``, ``if i % 2:`` and ``not (i % 3)`` stopped with TVM's bare
    "Check failed: (a_ty.MatchesCode(DLDataTypeCode::kDLBool))" (the first two at the ``def``
    line); they are Python's and C's truth tests now (NaN is true, -0.0 false)."""

    @T.prim_func
    def truth(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"), C: T.Tensor((8,), "int32")):
        with T.Kernel(1):
            for i in T.serial(8):
                if A[i]:
                    B[i] = 1.0
                else:
                    B[i] = 2.0
                if i % 2:
                    C[i] = 1
                else:
                    C[i] = 2
                if not (i % 3):
                    C[i] = C[i] + 10

    kernel = tilelang.compile(truth, target=target, execution_backend=backend)
    a = torch.tensor([0.0, 1.0, -2.0, float("nan"), 0.0, -0.0, 3.0, 1e-30])
    b, c = torch.zeros(8), torch.zeros(8, dtype=torch.int32)
    kernel(a, b, c)
    assert b.tolist() == [1.0 if bool(x) else 2.0 for x in a.tolist()]
    assert c.tolist() == [(1 if i % 2 else 2) + (10 if not (i % 3) else 0) for i in range(8)]
