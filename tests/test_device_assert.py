"""``T.device_assert``: a failed check stops the call with the kernel line (lowering/device_assert.py).

On CPU targets every backend raises ``RuntimeError("<kernel>() failed: T.device_assert failed at
file:line: msg")``: the C entry point returns the check's status (-3 - k for its k-th check) and
a function of the library names its text (cython, ctypes), TVM's
runtime modules raise it (tvm_ffi). A passing check changes nothing; the message survives the
kernel cache; blocks that run in parallel report it too. On CUDA the generated source prints the
text and traps, and compiles with nvcc; Metal drops the statement.
"""

from __future__ import annotations

import inspect
import pathlib
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.jit import compile as compile_module
from tilelang_core.language.tileops._common import OperandTypeError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from backend_pairs import cpu_pairs  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_asserts")


PAIRS = cpu_pairs()


def sqrt_kernel(n: int, block: int):
    @T.prim_func
    def checked_sqrt(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                T.device_assert(A[bx * block + i] >= 0, "negative input")
                B[bx * block + i] = T.sqrt(A[bx * block + i])

    return checked_sqrt


ASSERT_LINE = inspect.getsourcelines(sqrt_kernel)[1] + 5  # the T.device_assert line
EXPECTED = rf"checked_sqrt\(\) failed: T.device_assert failed at .*test_device_assert.py:{ASSERT_LINE}: negative input$"


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", PAIRS)
def test_a_failed_assertion_raises_with_the_kernel_line(backend, target):
    kernel = tilelang.compile(sqrt_kernel(256, 64), target=target, execution_backend=backend)
    a, b = torch.rand(256), torch.zeros(256)
    kernel(a, b)
    torch.testing.assert_close(b, a.sqrt())
    a[200] = -1.0
    with pytest.raises(RuntimeError, match=EXPECTED):
        kernel(a, b)
    a[200] = 4.0  # a good call afterwards runs as before
    kernel(a, b)
    torch.testing.assert_close(b, a.sqrt())


@pytest.mark.parametrize("backend,target", PAIRS[:3])
def test_blocks_running_in_parallel_report_the_failure(backend, target):
    n = 1 << 18  # enough work for the blocks to run on several threads
    kernel = tilelang.compile(sqrt_kernel(n, 1024), target=target, execution_backend=backend)
    a, b = torch.rand(n), torch.zeros(n)
    a[n - 5] = -2.0
    with pytest.raises(RuntimeError, match=EXPECTED):
        kernel(a, b)


def three_checks(n: int, block: int):
    """Blocks of 1,024 elements; an element equal to 1, 2 or 3 fails the check with that text."""

    @T.prim_func
    def three_checks(A: T.Tensor((n,), T.int32), B: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                T.device_assert(A[bx * block + i] != 1, "one")
                T.device_assert(A[bx * block + i] != 2, "two")
                T.device_assert(A[bx * block + i] != 3, "three")
                B[bx * block + i] = A[bx * block + i] * 2

    return three_checks


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", PAIRS)
def test_concurrent_failing_calls_each_report_their_own_assertion(backend, target):
    """Two threads whose calls fail at the same time, at two different checks: each error names its
    own check. (The text of the last failure was once kept in one place per library, and about half
    of such errors read the other thread's text.)"""
    import threading

    n = 1 << 17  # enough elements for cython to call the kernel without the GIL
    kernel = tilelang.compile(three_checks(n, 1024), target=target, execution_backend=backend)
    start, wrong = threading.Barrier(2), []

    def fail_at(value: int, expected: str) -> None:
        a, b = torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
        a[n // 2] = value
        start.wait()
        for _ in range(150):
            try:
                kernel(a, b)
                wrong.append("no error")
            except RuntimeError as exc:
                if not str(exc).endswith(f": {expected}"):
                    wrong.append(str(exc))

    threads = [threading.Thread(target=fail_at, args=args) for args in ((2, "two"), (3, "three"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, f"{len(wrong)} of 300 errors named another check, e.g. {wrong[0]!r}"


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
def test_a_status_gives_its_own_text_after_another_call_failed_elsewhere():
    """The interleaving of the test above, made certain: call 1 fails at "two", call 2 at
    "three", then call 1's status is read. Through the library's own entry and text function
    (the retired ctypes backend is the one that hands them out as they are)."""
    pytest.importorskip("tilelang_backend_ctypes", reason="tilelang-backend-ctypes is not installed")
    kernel = tilelang.compile(three_checks(2048, 1024), target="c", execution_backend="ctypes")
    entry, text_of = kernel.runner.function, kernel.runner.assert_message
    b = torch.zeros(2048, dtype=torch.int32)
    two, three = torch.zeros(2048, dtype=torch.int32), torch.zeros(2048, dtype=torch.int32)
    two[5], three[1500] = 2, 3
    first, second = entry(two.data_ptr(), b.data_ptr()), entry(three.data_ptr(), b.data_ptr())
    assert (first, second) == (-4, -5)
    assert text_of(first).endswith(b": two") and text_of(second).endswith(b": three")
    assert text_of(-3).endswith(b": one") and text_of(-6) is None and text_of(-1) is None


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", PAIRS)
def test_blocks_failing_at_different_checks_report_one_of_them(backend, target):
    """Block ranges that fail at different checks on several threads: the call reports one of
    those checks, whole (statuses combined bit by bit once read as 'a dynamic size is negative')."""
    n = 1 << 18
    kernel = tilelang.compile(three_checks(n, 1024), target=target, execution_backend=backend)
    a, b = torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
    a[: n // 2 : 1024], a[n // 2 :: 1024] = 2, 3  # every block fails: the first half at "two", the rest at "three"
    for _ in range(5):
        with pytest.raises(RuntimeError, match=r"three_checks\(\) failed: T.device_assert failed at .*: (two|three)$"):
            kernel(a, b)


def test_the_message_survives_a_disk_cache_hit(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    first = tilelang.compile(sqrt_kernel(64, 64), target="c", execution_backend="cython")
    compile_module.clear_memory()
    tilelang.cache.get_cache().memory.clear()
    try:
        again = tilelang.compile(sqrt_kernel(64, 64), target="c", execution_backend="cython")
        assert again is not first and again.cache_key == first.cache_key
        with pytest.raises(RuntimeError, match=EXPECTED):
            again(torch.full((64,), -1.0), torch.zeros(64))
    finally:
        compile_module.clear_memory()
        tilelang.cache.get_cache().memory.clear()


def test_conditions_and_messages():
    @T.prim_func
    def forms(A: T.Tensor((4,), T.int32), flag: T.int32):
        with T.Kernel(1, threads=1) as _:
            T.device_assert(flag)  # an integer: compared with 0
            T.device_assert(True, 'quotes " and \\ backslashes')
            A[0] = flag

    kernel = tilelang.compile(forms, target="c", execution_backend="cython")
    a = torch.zeros(4, dtype=torch.int32)
    kernel(a, 3)
    assert a[0] == 3
    with pytest.raises(RuntimeError, match=r"forms\(\) failed: T.device_assert failed at .*:\d+$"):
        kernel(a, 0)


def test_the_status_code_is_one_number_everywhere():
    from tilelang_core import calling
    from tilelang_core.lowering import device_assert

    assert calling.DEVICE_ASSERT_FAILED == device_assert.DEVICE_ASSERT_FAILED == -3
    assert [calling.assertion_status(k) for k in range(3)] == [-3, -4, -5]


def test_the_text_function_maps_each_status_to_its_check():
    source = lower(three_checks(2048, 1024), target="c").device_source
    assert "const char *three_checks_kernel_assert_message(int32_t status)" in source
    for status, text in ((-3, "one"), (-4, "two"), (-5, "three")):
        assert re.search(rf'case {status}: return ".*: {text}";', source)


def test_a_message_that_is_not_a_str_is_refused():
    with pytest.raises(OperandTypeError, match=r"T.device_assert\(.*\): msg must be a str, got int"):

        @T.prim_func
        def bad(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=1) as _:
                T.device_assert(A[0] > 0, 3)


def test_cuda_source_prints_and_traps_and_compiles_with_nvcc(tmp_path):
    artifact = lower(sqrt_kernel(256, 64), target="cuda")
    source = artifact.device_source
    assert "__trap();" in source and f'test_device_assert.py:{ASSERT_LINE}: negative input"' in source
    if CU.NVCC is None:
        pytest.skip("nvcc is not installed")
    CU.compile_translation_units({"checked_sqrt": artifact}, tmp_path)


def test_metal_drops_the_statement():
    source = lower(sqrt_kernel(256, 64), target="metal").device_source
    assert "device_assert" not in source and "negative input" not in source


@pytest.mark.gpu
@CU.requires_gpu
def test_gpu_passing_assertion_changes_nothing():
    kernel = tilelang.compile(sqrt_kernel(256, 64), target="cuda")
    a = torch.rand(256, device="cuda")
    b = torch.zeros(256, device="cuda")
    kernel(a, b)
    torch.testing.assert_close(b, a.sqrt())
