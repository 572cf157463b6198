"""A ``@T.macro`` with statements called where they cannot run as Python runs them
(language/macro_arguments.py ``expression_context``).

TVMScript emitted the macro's statements where the expression was evaluated: in a ``while``
condition once, before the loop, so the condition never changed and the kernel hung; in a branch
of ``x if c else y`` of a run-time condition, or right of a run-time ``and``/``or``, for every
element (an atomic ran where Python would not call the macro). Such calls are refused at the
call's line; macros that are a single expression work there, and the refused forms work written
with statements.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import KernelDefinitionError


@T.macro
def _positive(C):
    v = C[0]
    return v > 0


@T.macro
def _bump(C):
    old = T.atomic_add(C[0], 1, return_prev=True)
    return old


@T.macro
def _is_positive(x):
    return x > 0


def _while_kernel():
    @T.prim_func
    def k(C: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as _:
            while _positive(C):
                C[0] = C[0] - 1

    return k


def _branch_kernel():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), C: T.Tensor((1,), "int32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                B[i] = _bump(C) if A[i] > 0 else -1

    return k


def _and_kernel():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), C: T.Tensor((1,), "int32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                if A[i] > 0 and _bump(C) >= 0:
                    B[i] = 1

    return k


def _line_of(text: str) -> int:
    lines = open(__file__).read().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line and "_line_of" not in line)


@pytest.mark.parametrize("make, place, call", [
    (_while_kernel, "the condition of a while loop", "while _positive(C):"),
    (_branch_kernel, "a branch of 'x if c else y'", "B[i] = _bump(C) if A[i] > 0 else -1"),
    (_and_kernel, "the right operand of 'and'/'or'", "if A[i] > 0 and _bump(C) >= 0:"),
])
def test_a_macro_with_statements_is_refused_in_expressions(make, place, call):
    line = _line_of(call)
    with pytest.raises(KernelDefinitionError, match=rf"test_macro_conditions.py:{line}: macro '_\w+' runs statements "
                                                    rf"\(its line .*test_macro_conditions.py:\d+\) and is called in "
                                                    rf"{place}"):
        make()


@T.prim_func
def _allowed(A: T.Tensor((4,), "float32"), C: T.Tensor((1,), "int32"), B: T.Tensor((4,), "int32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            B[i] = 1 if _is_positive(A[i]) and _is_positive(A[i] + 1.0) else 0
        ok = _positive(C)
        while ok:
            C[0] = C[0] - 1
            ok = _positive(C)


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_single_expression_macros_and_statement_forms_work(backend, target):
    kernel = tilelang.compile(_allowed, target=target, execution_backend=backend)
    a = torch.tensor([1.0, -0.5, 2.0, -3.0])
    c = torch.tensor([5], dtype=torch.int32)
    b = torch.zeros(4, dtype=torch.int32)
    kernel(a, c, b)
    assert b.tolist() == [1, 0, 1, 0]
    assert c.item() == 0


FLAG = True
USE = 1
ZERO = 0


@T.macro
def _plus_one_positive(C):
    v = C[0] + 1
    return v > 0


@T.prim_func
def _python_left_operands(A: T.Tensor((4,), "float32"), C: T.Tensor((1,), "int32"), B: T.Tensor((4,), "int32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            if FLAG and _plus_one_positive(C):
                B[i] = 1
            if USE and _plus_one_positive(C):  # an int known when parsed: Python's and, not refused
                B[i] = B[i] + 10
            if ZERO and _plus_one_positive(C):  # never evaluated, as in Python
                B[i] = B[i] + 100
            if None or A[i] > 0:
                B[i] = B[i] + 1000


def test_and_or_of_python_values_are_pythons():
    kernel = tilelang.compile(_python_left_operands, target="c", execution_backend="cython")
    a = torch.tensor([1.0, -1.0, 2.0, -2.0])
    b = torch.zeros(4, dtype=torch.int32)
    kernel(a, torch.zeros(1, dtype=torch.int32), b)
    assert b.tolist() == [1011, 11, 1011, 11]
