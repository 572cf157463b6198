"""Divisions by a run-time divisor of -1 lower and run on every CPU pair, in a let value too.

The division is checked (a divisor of 0 is an error naming it) and made trap-free for ``-1``:
the quotient by ``-1`` is computed as an unsigned ``0 - x``, behind a barrier from the simplifier
(lowering/checked_divisions.py). In a let value the simplifier knows the operand on the ``-1``
arm (``-8 // -1`` is ``-8 // 1``), and LLVM's code generator simplifies every let value again
after the barriers are gone. ``-8 // d`` failed to lower for ``llvm`` ("cannot make uint from
negative value -8") and ``8 // d`` too ("Literal value 4294967288 exceeds range of int32"): TVM
refuses to fold a cast of a constant that does not fit. StripBarriers (lowering/barriers.py) now
folds such constants itself, wrapping.

And ``A[1] // d`` alone in a statement, with ``A[1] = -2**31, d = -1``, stopped the process with
SIGFPE on ``llvm``: from ``Select(d == -1, -q, q)`` LLVM rewrote the divisor of ``q`` on its
``d != -1`` arm (``umax(d, 1)``) and still computed ``q`` for ``d = -1``. Now the divisor alone is
guarded (1 where it is 0, or -1 with the minimum as dividend), with no select around the quotient.
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

q0, q1, q2, q3 = (tirx.Var(f"q{i}", "int32") for i in range(4))  # one variable per let


@T.prim_func
def constant_over_divisor(A: T.Tensor((4,), "int32"), d: T.int32):
    with T.Kernel(1) as bx:
        A[0] = T.Let(q0 + 1, where={q0: 8 // d})
        A[1] = T.Let(q1 + 1, where={q1: -8 // d})
        A[2] = T.Let(q2, where={q2: T.int32(-2**31) // d})
        A[3] = T.Let(q3, where={q3: T.truncdiv(-7, d)})


def _run(backend, target, d):
    A = torch.zeros(4, dtype=torch.int32)
    tilelang.compile(constant_over_divisor, execution_backend=backend, target=target)(A, d)
    return A.tolist()


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_let_value_divides_a_constant_by_a_run_time_divisor(backend, target):
    assert _run(backend, target, -1) == [-7, 9, -2**31, 7]  # MIN // -1 wraps to MIN, as in torch
    assert _run(backend, target, 3) == [3, -2, -715827883, -2]
    with pytest.raises(RuntimeError, match=r"the divisor d of 8 // d is 0"):
        _run(backend, target, 0)


@T.prim_func
def minimum_over_divisor(A: T.Tensor((5,), "int32"), B: T.Tensor((2,), "int64"), d: T.int32, e: T.int64):
    with T.Kernel(1) as bx:
        A[1] = A[0] // d
        A[2] = T.truncdiv(A[0], d)
        A[3] = A[0] % d
        A[4] = T.Let(q0, where={q0: A[0] // d})
        B[1] = B[0] // e


def _wrapped(value, bits):
    """``value`` wrapped around to a signed integer of ``bits`` bits."""
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_minimum_by_minus_one_wraps_around_without_a_trap(backend, target):
    # the expected values in Python: torch's own truncating division of MIN by -1 traps (SIGFPE)
    kernel = tilelang.compile(minimum_over_divisor, execution_backend=backend, target=target)
    for a, d in [(-2**31, -1), (-2**31 + 1, -1), (-7, -1), (-2**31, 2), (7, -2)]:
        b = -2**63 if a == -2**31 else a
        A = torch.tensor([a, 0, 0, 0, 0], dtype=torch.int32)
        B = torch.tensor([b, 0], dtype=torch.int64)
        kernel(A, B, d, d)
        quotient = _wrapped(a // d, 32)
        truncated = _wrapped(abs(a) // abs(d) * (1 if (a < 0) == (d < 0) else -1), 32)
        assert A.tolist() == [a, quotient, truncated, a % d, quotient], (a, d)
        assert B.tolist() == [b, _wrapped(b // d, 64)], (a, d)
