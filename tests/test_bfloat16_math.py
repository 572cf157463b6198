"""``T.pow`` / ``T.isnan`` / ``T.isinf`` / ``T.isfinite`` of bfloat16 (language/bfloat16_math.py).

TVM 0.27 refused all four for bfloat16 when the kernel was defined. Their values on the CPU
targets are checked against torch in tests/test_cpu_math.py (every function, every CPU backend);
here: the result dtypes, that other dtypes reach TVM unchanged, and the GPU sources.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_core.language import bfloat16_math

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvrtc_toolchain import nvrtc_available  # noqa: E402

N = 32


def bf16_kernel():
    @T.prim_func
    def bf16_math(X: T.Tensor((N,), T.bfloat16), Y: T.Tensor((4, N), T.bfloat16)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                Y[0, i] = T.pow(X[i], X[(i + 1) % N])
                Y[1, i] = T.Cast(T.bfloat16, T.isnan(X[i]))
                Y[2, i] = T.Cast(T.bfloat16, T.isinf(X[i]))
                Y[3, i] = T.Cast(T.bfloat16, T.isfinite(X[i]))

    return bf16_math


def test_result_dtypes_follow_the_operands():
    b, f = tirx.Var("b", "bfloat16"), tirx.Var("f", "float32")
    assert str(T.pow(b, b).ty.dtype) == "bfloat16"
    assert str(T.pow(b, 2.0).ty.dtype) == "bfloat16"
    assert str(T.pow(b, f).ty.dtype) == "float32"  # next to a float32 expression: float32, as TVM promotes
    for classify in (T.isnan, T.isinf, T.isfinite):
        assert str(classify(b).ty.dtype) == "bool"
    v = tirx.Var("v", "bfloat16x4")
    assert str(T.isnan(v).ty.dtype) == "boolx4" and str(T.pow(v, v).ty.dtype) == "bfloat16x4"


def test_other_dtypes_reach_tvm_unchanged():
    from tvm.tirx import _ffi_api

    for name in ("_OpPow", "isnan", "isinf", "isfinite"):
        original = getattr(getattr(_ffi_api, name), bfloat16_math._WRAPPED_MARK)
        for dtype in ("float16", "float32", "float64"):
            x = tirx.Var("x", dtype)
            args = (x, x, None) if name == "_OpPow" else (x, None)
            tvm.ir.assert_structural_equal(getattr(_ffi_api, name)(*args), original(*args))
    bfloat16_math.install()  # idempotent: a second install wraps nothing twice
    assert not hasattr(getattr(_ffi_api.isnan, bfloat16_math._WRAPPED_MARK), bfloat16_math._WRAPPED_MARK)


# TVM writes isnan(x) as x != x and isinf(x) with fabs, here of the float32 value
@pytest.mark.parametrize("target,calls", [
    ("cuda", ("powf(((float)X_ptr", "fabsf(((float)X_ptr", "CUDART_INF_F")),
    ("metal", ("pow((as_type<float>", "fabs((as_type<float>", "INFINITY")),
])
def test_gpu_sources_compute_in_float32(target, calls):
    source = tilelang.lower(bf16_kernel(), target=target).kernel_source
    for call in calls:
        assert call in source, (call, source)


@pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")
def test_the_cuda_source_compiles_with_nvrtc():
    kernel = tilelang.compile(bf16_kernel(), target="cuda", execution_backend="nvrtc")
    assert "powf(" in kernel.get_kernel_source()
