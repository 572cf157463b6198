"""``for`` over a Python list or tuple in a kernel is unrolled when the kernel is parsed, as in TileLang.

TVMScript stopped ``for w in (1.0, 2.0, 3.0):`` and ``for v in vals:`` (a macro's ``*vals``) with
"Expect the for loop to be one of the following: range, T.serial, ..." (language/python_loops.py).
"""

from __future__ import annotations

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T


@T.macro
def weighted_sum(out, x, *weights):
    for k, w in enumerate(weights):
        out[0] = out[0] + x * w * (k + 1)


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_a_loop_over_a_tuple_or_a_macros_varargs_is_unrolled(backend, target):
    WEIGHTS = [0.5, -2.0]

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"), S: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(8):
                B[i] = 0.0
                for w in (1.0, 2.0, 3.0):
                    B[i] += A[i] * w
                for j, scale in [(0, 10.0), (1, 100.0)]:
                    if i == j:
                        B[i] = B[i] * scale
            S[0] = 0.0
            weighted_sum(S, A[7], *WEIGHTS)

    kernel = tilelang.compile(k, target=target, execution_backend=backend)
    a = torch.arange(8, dtype=torch.float32) - 3
    b, s = torch.zeros(8), torch.zeros(1)
    kernel(a, b, s)
    expected = a * 6
    expected[0] *= 10
    expected[1] *= 100
    torch.testing.assert_close(b, expected)
    assert s.item() == pytest.approx(a[7].item() * (0.5 * 1 + -2.0 * 2))


def test_break_in_an_unrolled_loop_is_refused_at_its_line():
    with pytest.raises(tvm.error.DiagnosticError, match="break in a for loop over a Python list or tuple is not supported"):

        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for w in (1.0, 2.0):
                    A[0] = A[0] + w
                    break
