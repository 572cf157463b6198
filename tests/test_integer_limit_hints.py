"""TVM's refusals to fold a constant past an integer type's limits say what to change.

``s - 10 < 2147483640`` stopped lowering on every CPU path with TVM's check text alone ("Literal
value 2147483650 exceeds range of int32": its simplifier moved the 10 across the comparison), and
``X[i] // -2147483648`` on ``llvm``. The LoweringError keeps the kernel's line and TVM's text and
now adds the way out (lowering/limit_hints.py); the rewritten kernel it suggests runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering.limit_hints import limit_hint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


@T.prim_func
def near_the_limit(Y: T.Tensor((1,), "int32"), s: T.int32):
    with T.Kernel(1) as bx:
        Y[0] = T.if_then_else(s - 10 < 2147483640, 1, 0)


@T.prim_func
def widened(Y: T.Tensor((1,), "int32"), s: T.int32):
    with T.Kernel(1) as bx:
        Y[0] = T.if_then_else(T.cast(s, "int64") - 10 < 2147483640, 1, 0)


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_constant_moved_past_int32_names_the_line_and_the_way_out(backend, target):
    with pytest.raises(LoweringError) as info:
        tilelang.compile(near_the_limit, execution_backend=backend, target=target)
    text = str(info.value)
    assert "test_integer_limit_hints.py:" in text and "2147483650" in text
    assert "compute that expression in a wider type" in text and 'T.cast(s, "int64")' in text
    Y = torch.zeros(1, dtype=torch.int32)
    tilelang.compile(widened, execution_backend=backend, target=target)(Y, 0)
    assert Y.tolist() == [1]


def test_other_failures_get_no_hint_and_unsigned_refusals_get_theirs():
    assert limit_hint("Cannot unroll non-constant loop") == ""
    assert "T.uint32(4294967295)" in limit_hint("Check failed: (value >= 0) is false: cannot make uint from negative value -1")


def test_a_negative_literal_beside_an_unsigned_value_is_refused_at_its_line_with_the_way_out():
    """TVMScript refuses ``A[i] + -1`` for a uint32 ``A`` when the kernel is defined (upstream
    with a C++ InternalError); the DiagnosticError keeps its type and marked line and now says
    what to write, and the written-out kernel computes what torch does."""
    import tvm

    with pytest.raises(tvm.error.DiagnosticError) as info:

        @T.prim_func
        def minus_one(A: T.Tensor((4,), "uint32"), B: T.Tensor((4,), "uint32")):
            with T.Kernel(1) as bx:
                for i in T.serial(4):
                    B[i] = A[i] + -1

    lines = str(info.value).splitlines()
    assert "cannot make uint from negative value -1" in lines[0]
    assert lines[1].startswith("hint: a negative constant met an unsigned value") and "T.uint32(4294967295)" in lines[1]
    assert any("B[i] = A[i] + -1" in line for line in lines[2:])

    with pytest.raises(tvm.error.DiagnosticError) as info:

        @T.prim_func
        def compared(A: T.Tensor((4,), "uint32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1) as bx:
                for i in T.serial(4):
                    B[i] = T.if_then_else(A[i] == -1, 1, 0)

    assert str(info.value).splitlines()[1].startswith("hint: ")

    @T.prim_func
    def written_out(A: T.Tensor((4,), "uint32"), B: T.Tensor((4,), "uint32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                B[i] = A[i] + T.uint32(4294967295)

    A = torch.tensor([0, 1, 7, 4294967295], dtype=torch.uint32)
    B = torch.zeros(4, dtype=torch.uint32)
    tilelang.compile(written_out, execution_backend="cython", target="c")(A, B)
    assert B.tolist() == [4294967295, 0, 6, 4294967294]


def test_other_definition_errors_are_left_as_tvmscript_gives_them():
    import tvm

    with pytest.raises(tvm.error.DiagnosticError) as info:

        @T.prim_func
        def undefined_name(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                A[0] = not_defined_anywhere  # noqa: F821

    assert "hint:" not in str(info.value) and "not_defined_anywhere" in str(info.value)
