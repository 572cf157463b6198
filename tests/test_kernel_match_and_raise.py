"""``match`` and ``raise`` statements in kernel bodies, as TileLang 0.1.15 runs them.

TVMScript stopped a kernel with a ``match`` with "to_doc is not implemented for: Match" (no line),
and one with a ``raise`` with "Visitor of AST node is not implemented: Raise", marking the whole
enclosing ``if`` (language/match_statements.py, language/raise_statements.py).
"""

from __future__ import annotations

import enum
import inspect

import pytest
import torch
from tvm.error import DiagnosticError

import tilelang
import tilelang.language as T

PATHS = [("cython", "c"), ("tvm_ffi", "llvm")]


class Mode(enum.Enum):
    FAST = 1
    EXACT = 2


def _by_python_value(op, mode=Mode.FAST, scale=None):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            for i in T.serial(8):
                match op:
                    case "add":
                        B[i] = A[i] + 1.0
                    case "mul" | "times" if scale is None:
                        B[i] = A[i] * 2.0
                    case "mul" | "times":
                        B[i] = A[i] * scale
                    case _:
                        match mode:
                            case Mode.FAST:
                                B[i] = -A[i]
                            case None:
                                B[i] = 0.0
                            case Mode.EXACT:
                                B[i] = A[i]

    return k


@pytest.mark.parametrize("backend,target", PATHS)
@pytest.mark.parametrize("op,mode,scale,expect", [
    ("add", Mode.FAST, None, lambda a: a + 1), ("times", Mode.FAST, None, lambda a: a * 2),
    ("mul", Mode.FAST, 3.0, lambda a: a * 3), ("neg", Mode.FAST, None, lambda a: -a),
    ("neg", Mode.EXACT, None, lambda a: a), ("neg", None, None, lambda a: a * 0),
])
def test_match_on_a_python_value_picks_its_case_when_parsed(backend, target, op, mode, scale, expect):
    kernel = _by_python_value(op, mode, scale)
    if_count = kernel.script().count("if ")
    assert if_count == 0, "a Python subject leaves no branch in the kernel"
    a = torch.arange(8, dtype=torch.float32) - 3
    b = torch.full((8,), 99.0)
    tilelang.compile(kernel, target=target, execution_backend=backend)(a, b)
    torch.testing.assert_close(b, expect(a))


@pytest.mark.parametrize("backend,target", PATHS)
def test_match_on_a_run_time_value_is_a_branch_the_kernel_runs(backend, target):
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1):
            for i in T.serial(8):
                match A[i]:
                    case 0:
                        B[i] = 10
                    case 1 | 2 if i > 2:
                        B[i] = 20
                    case _:
                        B[i] = 30

    a = torch.tensor([0, 1, 2, 3, 0, 2, 1, 5], dtype=torch.int32)
    b = torch.zeros(8, dtype=torch.int32)
    tilelang.compile(k, target=target, execution_backend=backend)(a, b)
    assert b.tolist() == [10, 30, 30, 30, 10, 20, 20, 30]


def test_a_capture_pattern_is_refused_at_its_case():
    with pytest.raises(DiagnosticError) as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                match 3:
                    case 4:
                        A[0] = 1.0
                    case other:
                        A[0] = other
    lines, first = inspect.getsourcelines(test_a_capture_pattern_is_refused_at_its_case)
    line = next(first + n for n, text in enumerate(lines) if "case other:" in text)
    text = str(info.value)
    assert "match: the capture pattern 'case other:' is not supported in a kernel" in text
    assert f"test_kernel_match_and_raise.py:{line}:" in text


def _raising(op):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            if op == "add":
                for i in T.serial(8):
                    B[i] = A[i] + 1.0
            elif op == "from":
                raise KeyError(op) from ValueError("the cause")
            else:
                raise ValueError(f"unknown op {op!r}")

    return k


def test_raise_in_a_branch_chosen_by_a_python_value_raises_the_exception_itself():
    with pytest.raises(ValueError, match="unknown op 'sub'") as info:
        _raising("sub")
    assert not isinstance(info.value, DiagnosticError)
    with pytest.raises(KeyError) as info:
        _raising("from")
    assert isinstance(info.value.__cause__, ValueError)
    b = torch.zeros(8)
    tilelang.compile(_raising("add"), target="c")(torch.ones(8), b)
    assert b.tolist() == [2.0] * 8


def test_raise_in_a_lazy_jit_kernel_reaches_the_caller():
    @tilelang.jit(target="c", out_idx=[1])
    def factory(n, op):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1):
                if op != "copy":
                    raise NotImplementedError(f"op {op}")
                for i in T.serial(n):
                    B[i] = A[i]

        return k

    with pytest.raises(NotImplementedError, match="op scale"):
        factory(8, "scale")
    assert factory(8, "copy")(torch.ones(8)).tolist() == [1.0] * 8


def test_raise_in_a_branch_the_kernel_runs_is_refused_at_its_line():
    with pytest.raises(DiagnosticError) as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.serial(8):
                    if A[i] < 0:
                        raise ValueError("negative")
    lines, first = inspect.getsourcelines(test_raise_in_a_branch_the_kernel_runs_is_refused_at_its_line)
    line = next(first + n for n, text in enumerate(lines) if 'raise ValueError("negative")' in text)
    text = str(info.value)
    assert "raise inside an if or while that the kernel runs" in text and "T.device_assert" in text
    assert f"test_kernel_match_and_raise.py:{line}:" in text
