"""Python functions called on run-time values in a kernel name the call and say what to write.

``min(A[i], 3.0)``, ``abs(x)``, ``math.exp(x)`` or a helper with ``if x > 0:`` run when the kernel
is parsed, on expressions of values known only when it runs. TVM's text for all of them was
"Cannot use and / or / not operator to Expr, hint: use tvm.tirx.all / tvm.tirx.any" or "bad
operand type for abs(): 'TensorLoad'" (language/python_calls.py).
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from tvm.error import DiagnosticError

import tilelang
import tilelang.language as T


def _relu(x):
    return x if x > 0 else 0.0


@T.macro
def _relu_macro(x):
    return x if x > 0 else 0.0


def _define(which):
    """Define a kernel whose store calls ``which`` on ``A[i]`` (TVMScript parses it here; the
    ``match`` on a Python value parses only the chosen case)."""

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            for i in T.serial(8):
                match which:
                    case "min":
                        B[i] = min(A[i], 3.0)
                    case "max":
                        B[i] = max(A[i], A[7 - i], 0.0)
                    case "abs":
                        B[i] = abs(A[i])
                    case "int":
                        B[i] = int(A[i])
                    case "bool":
                        B[i] = bool(A[i])
                    case "math.exp":
                        B[i] = math.exp(A[i])
                    case "helper":
                        B[i] = _relu(A[i])
                    case "float":
                        B[i] = float(A[i])
                    case "divmod":
                        B[i] = divmod(A[i], 3.0)[1]
                    case "math.copysign":
                        B[i] = math.copysign(2.0, A[i])
                    case "power":
                        B[i] = A[i] ** 2
                    case "pow":
                        B[i] = pow(A[i], 2)

    return k


def _store_line(which):
    """The line number of ``which``'s store in :func:`_define`."""
    lines, first = inspect.getsourcelines(_define)
    spelled = {"helper": "_relu(A[i])", "math.exp": "math.exp(A[i])", "max": "max(A[i]",
               "bool": "bool(A[i])", "int": "int(A[i])", "abs": "abs(A[i])", "min": "min(A[i]",
               "float": "float(A[i])", "divmod": "divmod(A[i]", "math.copysign": "math.copysign(",
               "power": "A[i] ** 2", "pow": "pow(A[i], 2)"}[which]
    return next(first + n for n, line in enumerate(lines) if "B[i] = " + spelled in line)


@pytest.mark.parametrize("which,says", [
    ("min", "min() is Python's built-in"),
    ("max", "max() is Python's built-in"),
    ("abs", "abs() is Python's built-in"),
    ("int", "int() is Python's built-in"),
    ("bool", "bool() is Python's built-in"),
    ("math.exp", "math.exp() runs when the kernel is parsed"),
    ("helper", "_relu() is a Python function"),
    ("float", "float() is Python's built-in"),  # Python 3.11's float() words its error otherwise
    ("divmod", "divmod() is Python's built-in"),
    ("math.copysign", "math.copysign() runs when the kernel is parsed"),
    ("power", "x ** y of a value known only when the kernel runs is not computed in kernels"),
    ("pow", "pow(x, y) of a value known only when the kernel runs is not computed in kernels"),
])
def test_python_call_on_a_run_time_value_names_the_call_and_its_line(which, says):
    with pytest.raises(DiagnosticError) as info:
        _define(which)
    text = str(info.value)
    assert says in text
    assert "a value known only when the kernel runs" in text
    assert f"test_python_calls_on_run_time_values.py:{_store_line(which)}:" in text
    if which != "helper":  # the helper's message keeps TVM's text as the cause, in parentheses
        assert "tvm.tirx.all" not in text


@pytest.mark.parametrize("which,instead", [
    ("min", "T.min(a, b)"), ("max", "T.max(a, b)"), ("abs", "T.abs(x)"), ("int", 'T.cast(x, "int32")'),
    ("bool", "x != 0"), ("math.exp", "T.exp(x)"), ("helper", "@T.macro"), ("float", 'T.cast(x, "float32")'),
    ("math.copysign", "T.copysign(x, y)"), ("power", "T.pow(x, y)"),
])
def test_python_call_on_a_run_time_value_says_what_to_write(which, instead):
    with pytest.raises(DiagnosticError, match=r"write .*" + instead.replace("(", r"\(").replace(")", r"\)")
                       if which != "helper" else "make it a @T.macro"):
        _define(which)


def test_what_the_messages_suggest_compiles_and_matches_torch():
    """Each replacement the messages name, and a @T.macro helper, gives Python's result."""

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8, 6), "float32")):
        with T.Kernel(1):
            for i in T.serial(8):
                B[i, 0] = T.min(A[i], 3.0)
                B[i, 1] = T.max(A[i], T.max(A[7 - i], 0.0))
                B[i, 2] = T.abs(A[i])
                B[i, 3] = T.cast(T.cast(A[i], "int32"), "float32")
                B[i, 4] = T.exp(A[i])
                B[i, 5] = _relu_macro(A[i])

    a = torch.tensor([-2.5, -0.5, 0.0, 0.5, 1.5, 2.7, 3.5, 9.9])
    b = torch.zeros(8, 6)
    tilelang.compile(k, target="c", execution_backend="cython")(a, b)
    want = torch.stack([a.clamp(max=3.0), torch.maximum(a, a.flip(0).clamp(min=0.0)), a.abs(), a.trunc(),
                        a.exp(), a.clamp(min=0.0)], dim=1)
    torch.testing.assert_close(b, want)


def test_python_calls_on_numbers_known_at_parse_time_still_work():
    """min/max/abs/int/math on Python numbers run when the kernel is parsed, as before."""
    n = 6

    @T.prim_func
    def k(B: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            for i in T.serial(min(n, 8)):
                B[i] = max(abs(-2), int(2.9)) + math.exp(0.0) + _relu(-1.0)

    b = torch.zeros(8)
    tilelang.compile(k, target="c", execution_backend="cython")(b)
    torch.testing.assert_close(b, torch.tensor([3.0] * 6 + [0.0] * 2))


def test_errors_of_tilelang_functions_keep_their_own_text():
    """A T. function's own error is not rewritten as a Python-call error."""
    with pytest.raises(Exception) as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                for i in T.serial(8):
                    B[i] = T.if_then_else(A[i], 1.0, 2.0, 3.0)
    assert "is a Python function" not in str(info.value)
    assert "Python's built-in" not in str(info.value)
