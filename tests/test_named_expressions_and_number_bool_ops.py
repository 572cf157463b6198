"""``(t := expr)`` and ``x or y`` / ``x and y`` of numbers in kernels, as in Python and TileLang.

TVMScript stopped the first with "Undefined variable: t" and the second with "'float' object has
no attribute 'expr_ty'" (language/named_expressions.py, language/python_conditions.py).
"""

from __future__ import annotations

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T

PAIRS = [("cython", "c"), ("tvm_ffi", "llvm")]


@pytest.mark.parametrize("backend,target", PAIRS)
def test_a_name_bound_in_an_if_test_is_the_value_in_both_branches(backend, target):
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(16):
                if (t := A[i] * 2.0) > 1.0:
                    B[i] = t
                else:
                    B[i] = t - 100.0

    a = torch.randn(16)
    b = torch.zeros(16)
    tilelang.compile(k, target=target, execution_backend=backend)(a, b)
    torch.testing.assert_close(b, torch.where(a * 2 > 1, a * 2, a * 2 - 100))


def test_a_name_bound_in_an_expression_is_read_later_in_it_and_after_it():
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32"), C: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(8):
                B[i] = (s := A[i] + 1) * s
                C[i] = s + (n := 10) + n  # a Python number is bound as the number

    a = torch.arange(8, dtype=torch.int32)
    b, c = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    tilelang.compile(k, target="c", execution_backend="cython")(a, b, c)
    assert b.tolist() == [(x + 1) ** 2 for x in range(8)]
    assert c.tolist() == [x + 1 + 20 for x in range(8)]


def test_a_named_expression_with_a_side_effect_is_refused_at_its_line():
    """Each use of the name would run the atomic again; a statement of its own runs it once."""
    with pytest.raises(tvm.error.DiagnosticError) as caught:

        @T.prim_func
        def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
            with T.Kernel(1) as bx:
                for i in T.serial(8):
                    B[i] = (old := T.atomic_add(A[0], 1, return_prev=True)) + old

    text = str(caught.value)
    assert "(old := ...) of an expression with a side effect" in text
    assert "old = ..." in text


@pytest.mark.parametrize("backend,target", PAIRS)
def test_or_and_and_of_numbers_give_pythons_value(backend, target):
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), I: T.Tensor((16,), "int32"), B: T.Tensor((16,), "float32"),
          C: T.Tensor((16,), "int32"), D: T.Tensor((16,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(16):
                B[i] = A[i] or 1.5
                C[i] = I[i] and i
                if I[i] and i > 3:  # a number next to a boolean: its truth
                    D[i] = 1
                else:
                    D[i] = 0

    a = torch.tensor([0.0, 2.0, -0.0, float("nan")] * 4)
    ints = torch.tensor([0, 3, 5, 0] * 4, dtype=torch.int32)
    b = torch.zeros(16)
    c, d = torch.zeros(16, dtype=torch.int32), torch.zeros(16, dtype=torch.int32)
    tilelang.compile(k, target=target, execution_backend=backend)(a, ints, b, c, d)
    expected_b = torch.tensor([x or 1.5 for x in a.tolist()])
    torch.testing.assert_close(b, expected_b, equal_nan=True)  # NaN is true: kept
    assert c.tolist() == [x and j for j, x in enumerate(ints.tolist())]
    assert d.tolist() == [int(bool(x and j > 3)) for j, x in enumerate(ints.tolist())]


def test_or_of_booleans_is_still_the_boolean_operation():
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(8):
                if i < 2 or A[i] > 5:
                    B[i] = 1

    assert "T.Or" in k.script() or " or " in k.script()
    a = torch.tensor([0, 0, 0, 9, 0, 9, 0, 0], dtype=torch.int32)
    b = torch.zeros(8, dtype=torch.int32)
    tilelang.compile(k, target="c", execution_backend="cython")(a, b)
    assert b.tolist() == [1, 1, 0, 1, 0, 1, 0, 0]


@pytest.mark.parametrize("backend,target", PAIRS)
def test_or_of_an_atomics_value_runs_the_atomic_once(backend, target):
    """Python evaluates ``x`` of ``x or y`` once; the select read it twice, so the atomic ran twice
    for each non-zero value."""

    @T.prim_func
    def k(S: T.Tensor((1,), "int32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                B[i] = T.atomic_add(S[0], 1, return_prev=True) or 100

    s, b = torch.zeros(1, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    tilelang.compile(k, target=target, execution_backend=backend)(s, b)
    assert s.item() == 4 and b.tolist() == [100, 1, 2, 3]
