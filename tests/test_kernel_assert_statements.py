"""Python ``assert`` statements in a kernel body (language/kernel_asserts.py).

A run-time condition is checked as ``T.device_assert`` checks it: every CPU backend raises
``RuntimeError("<kernel>() failed: assert failed at file:line: msg")`` (on target ``c`` a failed
assert used to be reported as "a dynamic size of the call is negative", the status -1 it shared
with that check), CUDA prints the text and traps. A condition known when the kernel is defined
is checked then (``assert N % 4 == 0`` without a message used to stop the definition with an
empty DiagnosticError). TVMScript's tuple message keeps TVMScript's own AssertStmt.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.calling import DEVICE_ASSERT_TEXT, KERNEL_ASSERT_TEXT, KERNEL_CHECK_TEXTS, kernel_check_text
from tilelang_core.language.kernel_asserts import KernelAssertionError
from tilelang_core.language.tileops._common import OperandTypeError
from tilelang_core.lowering import lower
from tilelang_core.lowering.device_assert import has_device_asserts

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from source_lines import marked_line  # noqa: E402

N = 8


def _where(marker: str) -> str:
    """``file:line`` of this file's line marked ``# <marker>``, as a regular expression."""
    return re.escape(f"{_THIS}:{marked_line(_THIS, marker)}")


def non_negative_copy(n: int):
    @T.prim_func
    def checked_copy(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(n):
                assert A[i] >= 0.0, "A must be non-negative"  # <with-message>
                B[i] = A[i]

    return checked_copy


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_failed_assert_raises_its_message_and_line_on_every_cpu_path(path):
    kernel = compile_on(non_negative_copy(N), path)
    a, b = torch.arange(N, dtype=torch.float32), torch.zeros(N)
    kernel(a, b)
    torch.testing.assert_close(b, a)
    expected = rf"^checked_copy\(\) failed: assert failed at {_where('with-message')}: A must be non-negative$"
    with pytest.raises(RuntimeError, match=expected):
        kernel(a - 3, b)
    kernel(a + 1, b)  # a good call afterwards runs as before
    torch.testing.assert_close(b, a + 1)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_without_a_message_the_text_is_the_condition_as_written(path):
    @T.prim_func
    def no_message(A: T.Tensor((N,), T.int32), n: T.int32):
        assert n > 0  # <host-side>
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(N):
                assert (A[i]  # <multi-line>
                        != 7)
                A[i] = A[i] + n

    kernel = compile_on(no_message, path)
    a = torch.zeros(N, dtype=torch.int32)
    kernel(a, 2)
    assert a.tolist() == [2] * N
    with pytest.raises(RuntimeError, match=rf"^no_message\(\) failed: assert failed at {_where('host-side')}: n > 0$"):
        kernel(a, 0)
    a[3] = 7
    with pytest.raises(RuntimeError,
                       match=rf"^no_message\(\) failed: assert failed at {_where('multi-line')}: A\[i\] != 7$"):
        kernel(a, 1)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_macros_integer_conditions_and_computed_messages(path):
    limit = 100

    @T.macro
    def check_small(x):
        assert x < limit, f"values must stay below {limit}"  # <in-macro>

    @T.prim_func
    def forms(A: T.Tensor((N,), T.int32), flag: T.int32):
        with T.Kernel(1, threads=1) as _:
            assert flag  # <integer>
            for i in T.serial(N):
                check_small(A[i])
                A[i] = A[i] + 1

    kernel = compile_on(forms, path)
    a = torch.zeros(N, dtype=torch.int32)
    kernel(a, 1)
    assert a.tolist() == [1] * N
    with pytest.raises(RuntimeError, match=rf"^forms\(\) failed: assert failed at {_where('integer')}: flag$"):
        kernel(a, 0)
    a[5] = 100
    with pytest.raises(RuntimeError,
                       match=rf"^forms\(\) failed: assert failed at {_where('in-macro')}: values must stay below 100$"):
        kernel(a, 1)


def test_a_condition_true_at_definition_emits_nothing():
    @T.prim_func
    def always(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=1) as _:
            assert N % 4 == 0  # no message: TVMScript's visitor stopped here with an empty DiagnosticError
            assert True, "never reported"
            assert T.int32(3) > 2
            for i in T.serial(N):
                A[i] = A[i] * 2.0

    assert not has_device_asserts(always)
    assert "assert" not in lower(always, target="c").device_source
    kernel = tilelang.compile(always, target="c", execution_backend="cython")
    a = torch.ones(N)
    kernel(a)
    assert a.tolist() == [2.0] * N


def test_a_condition_false_at_definition_is_an_error_naming_the_line():
    with pytest.raises(KernelAssertionError) as info:

        @T.prim_func
        def multiple_of_three(A: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=1) as _:
                assert N % 3 == 0, "N must be a multiple of 3"  # <false-with-message>
                A[0] = A[1]

    assert isinstance(info.value, AssertionError)  # what Python's assert raises
    assert re.fullmatch(rf"{_where('false-with-message')}: assert N % 3 == 0: the assertion is false when the kernel "
                        r"is defined: N must be a multiple of 3", str(info.value)), str(info.value)

    with pytest.raises(KernelAssertionError,
                       match=rf"^{_where('false-no-message')}: assert N > 100: the assertion is false when the kernel "
                             r"is defined$"):

        @T.prim_func
        def too_small(A: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=1) as _:
                assert N > 100  # <false-no-message>
                A[0] = A[1]


def test_a_buffer_condition_is_refused():
    with pytest.raises(OperandTypeError, match=rf"^{_where('buffer')}: assert: the condition must be a scalar"):

        @T.prim_func
        def buffer_condition(A: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=1) as _:
                assert A, "A"  # <buffer>
                A[0] = A[1]


def test_the_tuple_message_keeps_tvmscripts_assert_statement():
    @T.prim_func
    def tuple_message(A: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=1) as _:
            assert A[0] > 0, ("ValueError", ["bad ", "value"])
            A[1] = A[0]

    assert not has_device_asserts(tuple_message)
    kernel = compile_on(tuple_message, ("tvm_ffi", "llvm"))
    kernel(torch.ones(N))
    with pytest.raises(ValueError, match="^bad value$"):
        kernel(torch.zeros(N))


def test_every_backend_recognizes_the_text():
    assert KERNEL_ASSERT_TEXT in KERNEL_CHECK_TEXTS
    text = f"{KERNEL_ASSERT_TEXT}k.py:8: A must be non-negative"
    assert kernel_check_text(f"Traceback ...\nRuntimeError: {text}\n") == text
    device = f"{DEVICE_ASSERT_TEXT}k.py:9: negative input"  # it ends with the new prefix: still whole
    assert kernel_check_text(f"RuntimeError: {device}") == device


def test_cuda_source_prints_and_traps():
    source = lower(non_negative_copy(N), target="cuda").device_source
    line = marked_line(_THIS, "with-message")
    assert "__trap();" in source
    assert f'{_THIS.name}:{line}: A must be non-negative"' in source
    assert f"{KERNEL_ASSERT_TEXT}" in source


def test_metal_drops_the_statement():
    source = lower(non_negative_copy(N), target="metal").device_source
    assert "non-negative" not in source
