"""Expressions over a variable are evaluated again after the variable changes (C entry point).

TVM 0.27's C code generator prints the operands of ``min``/``max`` through a cache keyed by
their text, so ``T.min(5, 9 - x)`` printed after ``x = x + 1`` reused the ``9 - x`` computed
before it: the C entry point (cython, ctypes) and TVM's C runtime modules (tvm_ffi/c) returned the first
value every time, with no error (codegen.min_max_as_selects). Each expression here is written twice, before a loop and inside it
after the variable changed, and compared with Python on every CPU backend and target.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T

PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]
STEPS = 8


def _model(x: int) -> list[int]:
    return [
        100 // min(5, 9 - x),
        max(x, 3) + min(2 * x, 7),
        min(max(x - 2, 0), 4),
        abs(x - 5),
        (x * 7) % max(x, 1),
        x if x > 3 else -x,
    ]


N_EXPR = len(_model(0))


@T.macro
def _row(Out, t, x):
    Out[t, 0] = 100 // T.min(5, 9 - x)
    Out[t, 1] = T.max(x, 3) + T.min(2 * x, 7)
    Out[t, 2] = T.clamp(x - 2, 0, 4)
    Out[t, 3] = T.abs(x - 5)
    Out[t, 4] = (x * 7) % T.max(x, 1)
    Out[t, 5] = T.if_then_else(x > 3, x, -x)


@T.prim_func
def reevaluated(Out: T.Tensor((STEPS, N_EXPR), T.int32)):
    with T.Kernel(1, threads=1) as _:
        x = T.alloc_var(T.int32, 0)
        _row(Out, 0, x)  # printed once before the loop, then again inside it after x changed
        for t in T.serial(STEPS - 1):
            x = x + 1
            _row(Out, t + 1, x)


@pytest.mark.parametrize("backend,target", PAIRS)
def test_expressions_over_a_changing_variable_match_python(backend, target):
    kernel = tilelang.compile(reevaluated, target=target, execution_backend=backend)
    out = torch.zeros(STEPS, N_EXPR, dtype=torch.int32)
    kernel(out)
    assert out.tolist() == [_model(x) for x in range(STEPS)]


def test_the_c_source_has_no_min_or_max_through_the_cache():
    source = tilelang.compile(reevaluated, target="c", execution_backend="cython").get_kernel_source()
    assert "int32_t v_ =" not in source, source
