"""Lowering follow-ups: parameter names, ``T.Kernel(is_cpu=True)``, parameter alignment (views
with a storage offset run on every CPU backend), compared against torch."""

from __future__ import annotations

import os
import sys
import re

import pytest
import torch

import tilelang_core
import tilelang_core.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
from source_lines import line_containing  # noqa: E402


def _line_of(marker: str) -> int:
    return line_containing(HERE, marker)


def _backend_or_skip(name, target):
    from tilelang_core.backends.selection import select_backend

    try:
        select_backend(name, target)
    except Exception as exc:  # noqa: BLE001 - backend missing or unavailable here
        pytest.skip(f"{name} backend not available for {target}: {exc}")


def one_cell_sum(n=64, is_cpu=False):
    @T.prim_func
    def total(A: T.Tensor((n,), "float32"), C: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1, is_cpu=is_cpu) as _:  # is-cpu-line
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for i in T.serial(n):
                acc[0] = acc[0] + A[i]
            C[0] = acc[0]

    return total


def scale_shift(n):
    @T.prim_func
    def scale_shift_kernel(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), alpha: T.float32):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    Y[bx * 32 + i] = X[bx * 32 + i] * alpha + 1.0

    return scale_shift_kernel


# --- parameter names ------------------------------------------------------------------------


def test_one_element_tensor_param_keeps_its_python_name():
    """TVMScript prints a (1,)-shaped buffer param as ``C.source``; the artifact says ``C``."""
    art = lower(one_cell_sum(), target="c")
    assert [p.name for p in art.params] == ["A", "C"]
    assert [a.name for a in art.device_kernels[0].args] == ["A", "C"]
    assert "float* C_ptr" in art.device_source and "source" not in art.device_source
    cuda = lower(scale_shift(100), target="cuda")
    assert [p.name for p in cuda.params] == ["X", "Y", "alpha"]
    gpu_names = {a.name for a in cuda.device_kernels[0].args}
    assert {"X", "Y", "alpha"} <= gpu_names
    art = lower(one_cell_sum(), target="llvm", consumes=["runtime_module"])
    assert [p.name for p in art.params] == ["A", "C"]


def test_param_name_helper_makes_identifiers():
    from tilelang_core.lowering.signature import param_name

    class Named:
        def __init__(self, name):
            self.name = name

    assert param_name(Named("C.source")) == "C"
    assert param_name(Named("a.b-c")) == "a_b_c"
    assert param_name(Named("1x")) == "_1x"


# --- T.Kernel(is_cpu=True) ------------------------------------------------------------------


def test_is_cpu_kernel_lowers_unchanged_on_cpu_and_fails_on_gpu():
    plain = lower(one_cell_sum(), target="c").device_source
    assert lower(one_cell_sum(is_cpu=True), target="c").device_source == plain
    with pytest.raises(LoweringError) as info:
        lower(one_cell_sum(is_cpu=True), target="cuda")
    assert str(info.value).startswith(f"{HERE}:{_line_of('# is-cpu-line')}: T.Kernel(..., is_cpu=True)")
    assert "GPU target" in str(info.value)


def test_is_cpu_kernel_runs_on_cpu():
    _backend_or_skip("cython", "c")
    a = torch.randn(64)
    c = torch.zeros(1)
    tilelang_core.compile(one_cell_sum(is_cpu=True), target="c", execution_backend="cython")(a, c)
    torch.testing.assert_close(c, a.sum().reshape(1), rtol=1e-5, atol=1e-5)


# --- alignment: tensor views with a storage offset -------------------------------------------


def test_params_are_declared_element_aligned():
    art = lower(scale_shift(100), target="llvm", consumes=["runtime_module"])
    ir = art.tvm_modules.inspect_source("ll")
    aligns = {int(n) for n in re.findall(r'"align"\(ptr [^,]+, i64 (\d+)\)', ir)}
    assert aligns <= {4}, aligns  # float32: 4 bytes, never TVM's default of 64


@pytest.mark.parametrize("backend,target", [("tvm_ffi", "llvm"), ("cython", "c")])
def test_offset_views_run_and_match_torch(backend, target):
    """``x[1:]`` views (4 bytes past an aligned address) on the llvm and c paths, vs torch."""
    _backend_or_skip(backend, target)
    n = 1000
    kernel = tilelang_core.compile(scale_shift(n), target=target, execution_backend=backend)
    if backend == "tvm_ffi":
        from tilelang_backend_tvmffi.kernel import kernel_state

        # the plugin reads the alignment from the module: no staged (copied) tensors
        assert kernel_state(kernel).alignment == 0
    for offset in (1, 3):
        xb = torch.randn(n + offset)
        yb = torch.full((n + offset,), float("nan"))
        x, y = xb[offset:], yb[offset:]
        assert x.data_ptr() % 64 != 0
        kernel(x, y, 2.5)
        torch.testing.assert_close(y, x * 2.5 + 1.0)
        assert torch.isnan(yb[:offset]).all()  # nothing written before the view


# --- CUDA runtime modules without nvrtc bindings -------------------------------------------


def test_cuda_runtime_module_uses_nvcc_without_nvrtc_bindings(monkeypatch):
    """Without cuda-python, lowering a CUDA runtime module selects TVM's nvcc compile mode for the
    build and restores the environment. (Here, without a CUDA runtime, TVM keeps the device source
    and compiles nothing; the gpu-marked test below runs the result on a device.)"""
    import importlib.util

    from tilelang_core.lowering import codegen

    monkeypatch.delenv(codegen.CUDA_COMPILE_MODE_ENV, raising=False)
    has_bindings = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None
    assert codegen.cuda_compile_mode_override() == (None if has_bindings else "nvcc")
    monkeypatch.setenv(codegen.CUDA_COMPILE_MODE_ENV, "nvrtc")
    assert codegen.cuda_compile_mode_override() is None  # an explicit choice is kept
    monkeypatch.delenv(codegen.CUDA_COMPILE_MODE_ENV)
    art = lower(scale_shift(100), target="cuda", consumes=["runtime_module"])
    assert art.tvm_modules is not None
    assert codegen.CUDA_COMPILE_MODE_ENV not in os.environ


def test_stand_in_cuda_build_gets_nvcc_without_touching_the_environment(monkeypatch):
    """Without the nvrtc bindings, the build runs with TVM's compile callback replaced by nvcc's,
    and os.environ is never changed: the environment variable that was set around the build was
    inherited by compilers other threads started, and a thread deciding its own build then took it
    for the user's choice. TVM's build is a stand-in here (no CUDA runtime to compile with)."""
    import importlib.util

    import sys

    import tvm_ffi

    from tilelang_core.lowering import codegen

    monkeypatch.delenv(codegen.CUDA_COMPILE_MODE_ENV, raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("cuda") else real_find_spec(name, *a))
    seen = {}

    def stand_in_build(host_mod, device_mods, host):
        seen["environment"] = os.environ.get(codegen.CUDA_COMPILE_MODE_ENV)
        seen["callback"] = tvm_ffi.get_global_func("tvm_callback_cuda_compile", allow_missing=True)
        return "module"

    monkeypatch.setattr(sys.modules["tvm.tirx.build"], "tir_to_runtime", stand_in_build)
    before = tvm_ffi.get_global_func("tvm_callback_cuda_compile", allow_missing=True)
    lower(scale_shift(100), target="cuda", consumes=["runtime_module"])
    assert seen["environment"] is None
    assert seen["callback"] is not None and not seen["callback"].same_as(before)
    after = tvm_ffi.get_global_func("tvm_callback_cuda_compile", allow_missing=True)
    assert (after is None and before is None) or after.same_as(before)  # TVM's callback is back


@pytest.mark.gpu
def test_cuda_runtime_module_runs_on_device():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is false)")
    _backend_or_skip("tvm_ffi", "cuda")
    n = 1000
    kernel = tilelang_core.compile(scale_shift(n), target="cuda", execution_backend="tvm_ffi")
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    kernel(x, y, 2.5)
    torch.testing.assert_close(y, x * 2.5 + 1.0)
