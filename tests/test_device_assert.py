"""``T.device_assert``: a failed check stops the call with the kernel line (lowering/device_assert.py).

On CPU targets every backend raises ``RuntimeError("<kernel>() failed: T.device_assert failed at
file:line: msg")``: the C entry point returns -3 and names the text (cython, ctypes), TVM's
runtime modules raise it (tvm_ffi). A passing check changes nothing; the message survives the
kernel cache; blocks that run in parallel report it too. On CUDA the generated source prints the
text and traps, and compiles with nvcc; Metal drops the statement.
"""

from __future__ import annotations

import inspect
import pathlib
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
