"""``return`` in a kernel body is refused at its line with what to write instead.

TVMScript stopped a bare ``return`` with an empty ``DiagnosticError: error:`` (and made one with a
value a TIR return of the C entry, a failed call). A macro's top-level ``return`` is the macro's
value and is not affected (tests/test_macro_late_binding.py).
"""

from __future__ import annotations

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T


def test_a_bare_return_in_a_kernel_is_refused_at_its_line():
    with pytest.raises(tvm.error.DiagnosticError) as info:

        @T.prim_func
        def early(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                if A[0] > 100.0:
                    return
                B[0] = 1.0

    text = str(info.value)
    assert text.startswith("error: return is not supported in a kernel body") and "`if not cond:`" in text
    assert "                    return" in text  # the marked source line


def test_a_return_with_a_value_is_refused_too():
    with pytest.raises(tvm.error.DiagnosticError, match="return is not supported in a kernel body"):

        @T.prim_func
        def valued(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                A[0] = 1.0
                return 0


def test_the_rewrite_the_error_suggests_runs():
    @T.prim_func
    def skipped(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            if not (A[0] > 100.0):
                B[0] = 1.0

    @T.macro
    def plus_one(x):
        return x + 1.0  # a macro's value: not refused

    @T.prim_func
    def with_macro(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            B[1] = plus_one(A[1])

    a, b = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    tilelang.compile(skipped, target="c", execution_backend="cython")(a, b)
    tilelang.compile(with_macro, target="c", execution_backend="cython")(a, b)
    assert b[:2].tolist() == [1.0, 2.0]
