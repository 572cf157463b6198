"""Divisions no check can precede (a ``while`` condition, a ``let`` body) never trap on CPU targets.

``check_divisions`` (lowering/checked_divisions.py) returned the kernel unchanged when it placed
no check, which also skipped its trap-free rewrite: ``while j < 8 // d`` called with ``d = 0``, and
``while j < A[7] // d + 3`` with ``A[7] = -2**31, d = -1``, stopped the Python process with SIGFPE
on every CPU path (one unrelated checked division in the kernel hid the bug). Checked here: such
a division divides by 1 where the divisor is 0 and ``MIN // -1`` is ``MIN``, as documented in
docs/tile-operators.md, without an error. A regression kills the test worker, which pytest reports
as a failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tvm import tirx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

x = tirx.Var("x", "int32")


@T.prim_func
def while_quotient(A: T.Tensor((8,), "int32"), d: T.int32):
    with T.Kernel(1) as bx:
        j = T.alloc_var("int32")
        j = 0
        while j < 8 // d:
            A[j] = A[j] + 1
            j = j + 1


@T.prim_func
def while_minimum(A: T.Tensor((8,), "int32"), d: T.int32):
    with T.Kernel(1) as bx:
        j = T.alloc_var("int32")
        j = 0
        while j < (A[7] // d) + 3:
            A[j] = 1
            j = j + 1


@T.prim_func
def let_and_select(A: T.Tensor((8,), "int32"), d: T.int32):
    with T.Kernel(1) as bx:
        A[0] = T.Let(8 // x, where={x: d + A[1]})  # a let body: no check
        j = T.alloc_var("int32")
        j = 0
        while j < T.Select(d < 5, T.truncmod(9, d) + T.truncdiv(6, d), 2):  # the taken arm of a Select
            A[j + 2] = 1
            j = j + 1


def _run(kernel, backend, target, a, d):
    A = torch.tensor(a, dtype=torch.int32)
    tilelang.compile(kernel, execution_backend=backend, target=target)(A, d)
    return A.tolist()


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_while_condition_divides_by_one_where_the_divisor_is_zero(backend, target):
    assert _run(while_quotient, backend, target, [0] * 8, 0) == [1] * 8  # 8 // 0 is 8 // 1
    assert _run(while_quotient, backend, target, [0] * 8, 2) == [1] * 4 + [0] * 4


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_while_condition_minimum_by_minus_one_wraps_around(backend, target):
    # -2**31 // -1 is -2**31 (torch's value): the loop runs no iteration
    assert _run(while_minimum, backend, target, [0] * 7 + [-2**31], -1) == [0] * 7 + [-2**31]
    assert _run(while_minimum, backend, target, [0] * 7 + [-6], -2) == [1] * 6 + [0, -6]


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_let_body_and_select_arm_divisions_do_not_trap(backend, target):
    # 8 // 0 is 8; 9 % 0 is 0 and 6 / 0 is 6: six iterations
    assert _run(let_and_select, backend, target, [0] * 8, 0) == [8, 0, 1, 1, 1, 1, 1, 1]
    assert _run(let_and_select, backend, target, [0, 2, 0, 0, 0, 0, 0, 0], 2) == [2, 2, 1, 1, 1, 1, 0, 0]
