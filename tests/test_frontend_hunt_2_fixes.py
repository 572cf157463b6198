"""Findings of a second hunt over Python constructs in kernels (each test failed before its fix):
a loop's ``else`` was dropped, ``in`` of a run-time value was a constant, an integer expression
compared with a Python float stopped in TVM, and ``A[i][j]`` re-indexed a region's first axis."""

from __future__ import annotations

import re

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T


def test_the_else_of_a_run_time_loop_is_refused_at_its_line():
    with pytest.raises(tvm.error.DiagnosticError, match="else of a for loop is not supported") as caught:

        @T.prim_func
        def k(A: T.Tensor((8,), "int32"), B: T.Tensor((1,), "int32")):
            with T.Kernel(1) as bx:
                for i in T.serial(8):
                    if A[i] < 0:
                        break
                else:
                    B[0] = 1

    assert "test_frontend_hunt_2_fixes.py" in str(caught.value)
    with pytest.raises(tvm.error.DiagnosticError, match="else of a while loop is not supported"):

        @T.prim_func
        def w(B: T.Tensor((1,), "int32")):
            with T.Kernel(1) as bx:
                v = T.alloc_var("int32", init=0)
                while v < 3:
                    v = v + 1
                else:
                    B[0] = 5


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_in_and_not_in_of_run_time_values(backend, target):
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(8):
                B[i] = 0
                if A[i] in (1, 2):
                    B[i] = B[i] + 1
                if A[i] not in [3, 4]:
                    B[i] = B[i] + 10
                if i in range(2, 7, 2):
                    B[i] = B[i] + 100
                if i not in range(6, 0, -2):
                    B[i] = B[i] + 1000

    a = torch.tensor([0, 1, 2, 3, 4, 5, 1, 9], dtype=torch.int32)
    b = torch.zeros(8, dtype=torch.int32)
    tilelang.compile(k, target=target, execution_backend=backend)(a, b)
    assert b.tolist() == [int(x in (1, 2)) + 10 * int(x not in [3, 4]) + 100 * int(i in range(2, 7, 2))
                          + 1000 * int(i not in range(6, 0, -2)) for i, x in enumerate(a.tolist())]


def test_in_of_another_container_says_what_is_supported():
    with pytest.raises(tvm.error.DiagnosticError, match="'in' of a run-time value tests it against a tuple"):

        @T.prim_func
        def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
            with T.Kernel(1) as bx:
                for i in T.serial(8):
                    if A[i] in {1: "a"}:
                        B[i] = 1


def test_an_integer_expression_compared_with_a_python_float_is_pythons_comparison():
    @T.prim_func
    def k(A: T.Tensor((6,), "int32"), H: T.Tensor((6,), "int16"), B: T.Tensor((6,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(6):
                B[i] = (T.if_then_else(A[i] < 2.5, 1, 0) + T.if_then_else(2.5 <= A[i], 10, 0)
                        + T.if_then_else(H[i] == 3.0, 100, 0) + T.if_then_else(A[i] > 16777216.5, 1000, 0))

    a = torch.tensor([0, 2, 3, 16777217, -5, 3], dtype=torch.int32)
    h = torch.tensor([3, 1, 3, 0, 0, 2], dtype=torch.int16)
    b = torch.zeros(6, dtype=torch.int32)
    tilelang.compile(k, target="c")(a, h, b)
    assert b.tolist() == [int(x < 2.5) + 10 * int(2.5 <= x) + 100 * int(y == 3.0) + 1000 * int(x > 16777216.5)
                          for x, y in zip(a.tolist(), h.tolist())]


@pytest.mark.parametrize("form", ["element", "tile"])
def test_a_region_indexed_again_is_refused(form):
    with pytest.raises(tvm.error.DiagnosticError, match=r"a region cannot be indexed again .*index the tensor once"):
        if form == "element":

            @T.prim_func
            def k(A: T.Tensor((4, 4), "int32"), B: T.Tensor((4,), "int32")):
                with T.Kernel(1) as bx:
                    for i in T.serial(4):
                        B[i] = A[i][1]
        else:

            @T.prim_func
            def k(A: T.Tensor((4, 4), "int32"), B: T.Tensor((4, 4), "int32")):
                with T.Kernel(1) as bx:
                    T.copy(A[0:2][1:3], B[0:2, :])


_NOTHING = None
_SCALE = 5


def test_a_conditional_expression_takes_pythons_truthiness():
    """``7 if A[i] else 9`` (a number tested against zero) and ``7 if cfg else 9`` with ``cfg =
    None`` were "Expected Python bool or TIR bool"; ``if`` statements already took both."""

    @T.prim_func
    def k(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32"), C: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                B[i] = 7 if A[i] else 9
                C[i] = 1 if _NOTHING else 2

    a = torch.tensor([0, 3, 0, -1], dtype=torch.int32)
    b, c = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    tilelang.compile(k, target="c")(a, b, c)
    assert b.tolist() == [9, 7, 9, 7] and c.tolist() == [2] * 4


def test_global_nonlocal_and_del_are_accepted_and_try_is_refused_at_its_line():
    @T.prim_func
    def k(A: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            global _SCALE
            cfg = 3
            del cfg
            for i in T.serial(4):
                A[i] = _SCALE

    a = torch.zeros(4, dtype=torch.int32)
    tilelang.compile(k, target="c")(a)
    assert a.tolist() == [5] * 4
    with pytest.raises(tvm.error.DiagnosticError, match="try/except is not supported in a kernel") as caught:

        @T.prim_func
        def t(A: T.Tensor((4,), "int32")):
            with T.Kernel(1) as bx:
                try:
                    A[0] = 1
                except Exception:
                    A[0] = 2

    assert "test_frontend_hunt_2_fixes.py" in str(caught.value)


@pytest.mark.parametrize("decorated", [False, True], ids=["def", "macro"])
def test_a_def_inside_a_kernel_body_says_where_to_define_the_helper(decorated):
    """TVMScript said "Function must be decorated" (a plain def) or "The parser does not understand
    the decorator" (a @T.macro); a macro defined outside the kernel, as the message says, works."""
    with pytest.raises(tvm.error.DiagnosticError, match=r"def sq\(\.\.\.\) inside kernel code \(a kernel body, or a "
                                                         r"T.macro used in one\) is not supported: define the helper "
                                                         r"outside the code TileLang parses"):

        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                if decorated:
                    @T.macro
                    def sq(x):
                        return x * x
                else:
                    def sq(x):
                        return x * x
                for i in T.serial(4):
                    B[i] = sq(A[i])


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_tuples_chosen_by_a_run_time_condition_are_chosen_item_by_item(backend, target):
    """``a, b = (x, 1.0) if c else (2.0, y)`` stopped with "Expected `ir.Expr` but got `ffi.Array`"."""

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(8):
                a, b = (A[i], 1.0) if A[i] > 3 else (2.0, A[i])
                B[i] = a * 10 + b

    x = torch.arange(8, dtype=torch.float32)
    y = torch.zeros(8)
    tilelang.compile(k, target=target, execution_backend=backend)(x, y)
    torch.testing.assert_close(y, torch.where(x > 3, x * 10 + 1, 20 + x))
    for which, says in (("longer", "its two tuples have 2 and 3 items"),
                        ("value", "one branch is a tuple and the other is not"),
                        ("none", "a branch is None")):
        with pytest.raises(tvm.error.DiagnosticError, match=re.escape(says)):
            _conditional_with(which)


def _conditional_with(which):
    """Define a kernel whose conditional's else branch is ``which`` (the ``match`` on a Python value
    parses only the chosen case)."""

    @T.prim_func
    def bad(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(8):
                match which:
                    case "longer":
                        a, b = (A[i], 1.0) if A[i] > 3 else (2.0, A[i], 3.0)
                    case "value":
                        a, b = (A[i], 1.0) if A[i] > 3 else 2.0
                    case "none":
                        a, b = (A[i], None) if A[i] > 3 else (2.0, None)
                B[i] = a


def test_unary_plus_of_an_expression_is_the_expression():
    """``+A[i]`` stopped with Python's "bad operand type for unary +: 'TensorLoad'"."""

    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                B[i] = +A[i] - (+i)

    b = torch.zeros(4)
    tilelang.compile(k, target="c")(torch.ones(4), b)
    assert b.tolist() == [1.0, 0.0, -1.0, -2.0]
