"""The call path, with a stand-in for ``torch.mps.compile_shader`` that records what it is given.

Kernels are built by the real backend through ``tilelang.compile``; only the device is replaced
(``kernel.runner.with_runtime(StandinRuntime(...))``). The recording stand-in checks what a Mac
would receive: one compile of the artifact's source, then per device kernel, in order, the
buffers, the scalar struct as int64 words, ``threads`` (grid x block) and ``group_size`` (block);
and every wrong call gets the contract's error, the device being ``mps``.
"""

from __future__ import annotations

import random
import threading

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import BackendUnavailableError, BuildError

import metal_kernels as MK
from mps_standin import StandinRuntime
from tilelang_backend_metal.packing import ScalarPacker


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def compiled(func, out_idx=-1):
    return tilelang.compile(func, out_idx=out_idx, execution_backend="metal", target="metal")


def standin(func, out_idx=-1, **kw):
    runtime = StandinRuntime(**kw)
    return compiled(func, out_idx).runner.with_runtime(runtime), runtime


def test_one_compile_of_the_artifact_source_then_launches_with_standin_shader_library():
    kernel, rt = standin(MK.scaled("int32"), out_idx=[1])
    x = torch.randn(1000)
    y = kernel(x, 5)
    y2 = kernel(torch.randn(10), -3)
    assert rt.sources == [kernel.artifact.device_source]  # compiled once, the source as lowered
    assert [c.kernel for c in rt.calls] == ["scaled_kernel_kernel"] * 2
    first, second = rt.calls
    assert first.tensors[0] is x and first.tensors[1] is y and y.shape == (1000,) and y.dtype == torch.float32
    assert first.threads == [1024, 1, 1] and first.group_size == [64, 1, 1]  # 16 threadgroups of 64
    assert second.threads == [64, 1, 1] and second.group_size == [64, 1, 1] and second.tensors[1] is y2
    struct = kernel.artifact.device_kernels[0].scalar_struct
    assert [s.field for s in struct.slots] == ["n", "s"]
    assert ScalarPacker.bytes_of(first.words) == (1000).to_bytes(8, "little") + (5).to_bytes(8, "little")
    assert ScalarPacker.bytes_of(second.words) == (10).to_bytes(8, "little") + (-3 & 0xFFFFFFFF).to_bytes(8, "little")


def test_every_scalar_dtype_reaches_the_struct_with_standin_shader_library():
    kernel, rt = standin(MK.every_scalar(), out_idx=[1])
    values = [v for v, _ in MK.SCALAR_VALUES.values()]
    kernel(torch.zeros(5), *values)
    (call,) = rt.calls
    struct = kernel.artifact.device_kernels[0].scalar_struct
    raw = ScalarPacker.bytes_of(call.words)
    assert len(raw) == struct.size == 8 * (len(values) + 1)
    by_field = {s.field: raw[s.offset : s.offset + s.size] for s in struct.slots}
    assert by_field["s_int64"] == (-(1 << 40)).to_bytes(8, "little", signed=True)
    assert by_field["s_uint32"] == (4000000000).to_bytes(4, "little") + bytes(4)
    assert by_field["s_bool"] == b"\x01" + bytes(7)
    assert by_field["s_float16"] == b"\x00\x3e" + bytes(6)  # 1.5 as IEEE half
    assert by_field["s_bfloat16"] == b"\x20\xc0" + bytes(6)  # -2.5 as bfloat16
    assert by_field["n"] == (5).to_bytes(8, "little")


def test_device_kernels_launch_in_order_with_their_own_sizes_with_standin_shader_library():
    kernel, rt = standin(MK.two_kernels(), out_idx=[1, 2])
    a = torch.randn(100)
    b, c = kernel(a, 2.0)
    assert [x.kernel for x in rt.calls] == ["two_kernels_kernel", "two_kernels_kernel_1"]
    first, second = rt.calls
    assert first.tensors == [a, b] and second.tensors == [b, c]  # the second reads what the first wrote
    assert (first.threads, first.group_size) == ([128, 1, 1], [64, 1, 1])
    assert (second.threads, second.group_size) == ([128, 2, 1], [32, 2, 1])
    assert ScalarPacker.bytes_of(first.words) == (100).to_bytes(8, "little") + b"\x00\x40" + bytes(6)  # n, half 2.0
    assert ScalarPacker.bytes_of(second.words) == (100).to_bytes(8, "little")


def test_a_zero_sized_grid_launches_nothing_with_standin_shader_library():
    kernel, rt = standin(MK.scaled("float32"), out_idx=[1])
    y = kernel(torch.zeros(0), 1.0)
    assert y.shape == (0,) and rt.calls == []


def test_static_kernel_without_scalars_passes_only_buffers_with_standin_shader_library():
    func = MK.tileops_module().matmul(96, 80, 72, 32, 32, 16, "float16", "float32", style="gpu")
    kernel, rt = standin(func, out_idx=None)
    a, b, c = torch.zeros(96, 72, dtype=torch.float16), torch.zeros(72, 80, dtype=torch.float16), torch.zeros(96, 80)
    assert kernel(a, b, c) is None
    (call,) = rt.calls
    assert call.args == [a, b, c] and call.words is None
    assert (call.threads, call.group_size) == ([384, 3, 1], [128, 1, 1])


def test_a_runtime_that_cannot_run_says_so_before_anything_else_with_standin_shader_library():
    kernel, rt = standin(MK.scaled("float32"), out_idx=[1], unavailable="torch has no MPS: test")
    with pytest.raises(BackendUnavailableError, match="torch has no MPS: test.*need macOS with torch's MPS"):
        kernel("not even a tensor")
    assert rt.sources == []


def test_a_shader_metal_does_not_compile_is_a_build_error_with_standin_shader_library():
    class Failing(StandinRuntime):
        def compile_shader(self, source):
            raise RuntimeError("program_source:12:5: error: use of undeclared identifier 'x'")

    kernel = compiled(MK.scaled("float32"), [1]).runner.with_runtime(Failing())
    with pytest.raises(BuildError, match="Metal could not compile kernel 'scaled_kernel'.*undeclared") as info:
        kernel(torch.zeros(3), 1.0)
    assert info.value.command == ["torch.mps.compile_shader"] and "undeclared" in info.value.output
    import os

    os.unlink(info.value.source)


def test_threadgroups_larger_than_the_gpu_allows_are_refused_with_standin_shader_library():
    class Small(StandinRuntime):
        def compile_shader(self, source):
            lib = super().compile_shader(source)
            kernel = getattr(lib, "scaled_kernel_kernel")
            kernel.max_threads_per_threadgroup = 32
            return type("Lib", (), {"scaled_kernel_kernel": kernel})()

    kernel = compiled(MK.scaled("float32"), [1]).runner.with_runtime(Small())
    with pytest.raises(BuildError, match="threadgroups of 64 threads; this GPU allows 32"):
        kernel(torch.zeros(3), 1.0)


def test_threads_calling_one_kernel_compile_once_with_standin_shader_library():
    kernel, rt = standin(MK.scaled("float32"), out_idx=[1])
    errors = []

    def work():
        try:
            for _ in range(20):
                kernel(torch.zeros(7), 1.0)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(rt.sources) == 1 and len(rt.calls) == 80


# -- wrong calls: the contract's errors, device mps ---------------------------------------------

N = T.dynamic("n")


def _row_kernel():
    @T.prim_func
    def rows(X: T.Tensor((N, 4), "float32"), Y: T.Tensor((N, 4), "float32"), s: T.int32):
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < N:
                    for j in T.serial(4):
                        Y[bx * 32 + i, j] = X[bx * 32 + i, j] + T.Cast("float32", s)

    return rows


@pytest.fixture(scope="module")
def rows_on_mps():
    """The kernel with a stand-in that claims to be ``mps``: every CPU tensor is on the wrong device."""
    import os

    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    try:
        return compiled(_row_kernel(), None).runner.with_runtime(StandinRuntime(device_type="mps"))
    finally:
        del os.environ["TILELANG_DISABLE_CACHE"]


@pytest.fixture(scope="module")
def rows_on_cpu():
    import os

    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    try:
        return compiled(_row_kernel(), None).runner.with_runtime(StandinRuntime(device_type="cpu"))
    finally:
        del os.environ["TILELANG_DISABLE_CACHE"]


def test_tensors_must_be_on_mps_with_standin_shader_library(rows_on_mps):
    with pytest.raises(ValueError, match=r"^rows\(\) argument 'X' \(#0\): expected a tensor on mps, got cpu$"):
        rows_on_mps(torch.zeros(3, 4), torch.zeros(3, 4), 1)


@pytest.mark.parametrize(
    "args, error, message",
    [
        ((torch.zeros(3, 4),), TypeError, r"rows\(\) takes 3 tensor/scalar arguments \(X, Y, s\), got 1"),
        (([0.0] * 12, torch.zeros(3, 4), 1), TypeError, r"argument 'X' \(#0\): expected a torch.Tensor, got list"),
        ((torch.zeros(3, 4, dtype=torch.float16), torch.zeros(3, 4), 1), ValueError, "expected dtype float32, got float16"),
        ((torch.zeros(3, 4, 1), torch.zeros(3, 4), 1), ValueError, "expected 2 dimensions, got 3"),
        ((torch.zeros(3, 5), torch.zeros(3, 5), 1), ValueError, r"expected shape\[1\] == 4, got 5"),
        ((torch.zeros(3, 4), torch.zeros(2, 4), 1), ValueError,
         r"argument 'Y' \(#1\): shape\[0\] binds symbol 'n' = 2, but argument 'X' bound it to 3"),
        ((torch.zeros(4, 3).T, torch.zeros(3, 4), 1), ValueError, r"expected a contiguous tensor, got strides \(1, 3\)"),
        ((torch.zeros(3, 4), torch.zeros(3, 4), "1"), TypeError, r"argument 's' \(#2\): expected an int, got str"),
        ((torch.zeros(3, 4), torch.zeros(3, 4), 1.5), TypeError, "expected an int, got float"),
        ((torch.zeros(3, 4), torch.zeros(3, 4), 1 << 31), ValueError, "does not fit in int32"),
    ],
)
def test_bad_calls_get_the_contract_errors_with_standin_shader_library(rows_on_cpu, args, error, message):
    with pytest.raises(error, match=message):
        rows_on_cpu(*args)


def test_random_wrong_calls_raise_only_contract_errors_with_standin_shader_library(rows_on_cpu):
    rng = random.Random(16)
    pool = [None, 1, 2.5, "x", [1, 2], torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.int32), torch.zeros(5, 4),
            torch.zeros(0, 4), torch.zeros(3), torch.zeros(4, 3).T, torch.zeros(3, 4, 2), 1 << 40, -1, True]
    for _ in range(1000):
        args = [rng.choice(pool) for _ in range(rng.choice([0, 1, 2, 3, 3, 3, 4]))]
        try:
            rows_on_cpu(*args)
        except (TypeError, ValueError) as exc:
            assert str(exc).startswith("rows()"), exc
