"""``T.cast(value, dtype, round=, sat=, rbits=)`` beyond the default conversion, per target, and
``tilelang.lower``'s TileLang flags ``enable_host_codegen`` / ``enable_device_compile``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError, TargetFeatureError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvrtc_toolchain import nvrtc_available  # noqa: E402

RS_HELPERS = {
    "float16": "__tl_cvt_f32x1_to_f16x1_rs_sat",
    "bfloat16": "__tl_cvt_f32x1_to_bf16x1_rs_sat",
    "float8_e4m3fn": "__tl_cvt_f32x1_to_e4m3x1_rs_sat",
    "float8_e5m2": "__tl_cvt_f32x1_to_e5m2x1_rs_sat",
    "float4_e2m1fn": "__tl_cvt_f32x1_to_e2m1x1_rs_sat",
}


def _rounding_kernel(dtype, rounding="rs", sat=True, n=128):
    @T.prim_func
    def rounded(X: T.Tensor((n,), T.float32), Bits: T.Tensor((n,), T.uint32), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                if rounding == "rs":
                    Y[i] = T.cast(X[i], dtype, round="rs", sat=sat, rbits=Bits[i])  # the cast line
                else:
                    Y[i] = T.cast(X[i], dtype, round=rounding, sat=sat)  # the cast line

    return rounded


@pytest.mark.slow
@pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend and its NVRTC wheels")
@pytest.mark.parametrize("dtype", sorted(RS_HELPERS))
def test_stochastic_rounding_builds_a_cubin_for_sm100a(dtype):
    if dtype == "float4_e2m1fn":  # torch cannot pass FP4 tensors: build the lowered source directly
        from tilelang_backend_nvrtc.arch import Arch
        from tilelang_backend_nvrtc.compiler import compile_cubin

        source = tilelang.lower(_rounding_kernel(dtype), target="cuda -arch=sm_100a").kernel_source
        assert compile_cubin("rounded", source, Arch.parse("sm_100a")) is not None
    else:
        kernel = tilelang.compile(_rounding_kernel(dtype), target="cuda -arch=sm_100a", execution_backend="nvrtc")
        source = kernel.get_kernel_source()
    assert RS_HELPERS[dtype] in source and "cvt.rs.satfinite" in source


@pytest.mark.parametrize("dtype,label", [("float16", "FP16"), ("bfloat16", "BF16"), ("float8_e5m2", "FP8"),
                                         ("float4_e2m1fn", "FP4")])
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_stochastic_rounding_names_the_architecture_it_needs(dtype, label, arch):
    with pytest.raises(TargetFeatureError, match=f"Stochastic rounding f32-to-{label} requires sm_100a") as err:
        tilelang.lower(_rounding_kernel(dtype), target=f"cuda -arch={arch}")
    assert isinstance(err.value, RuntimeError) and f"the target is {arch}" in str(err.value)
    assert "test_compat_casts.py" in str(err.value)


def test_stochastic_rounding_without_saturation_is_refused():
    with pytest.raises(LoweringError, match="sat=false is not supported"):
        tilelang.lower(_rounding_kernel("float16", sat=False), target="cuda -arch=sm_100a")


def test_rounding_modes_on_cpu_are_refused_at_the_cast_line():
    for rounding in ("rs", "rz", "rm", "rp"):
        with pytest.raises(LoweringError, match=f"round='{rounding}'.*lowered only for CUDA targets") as err:
            tilelang.compile(_rounding_kernel("float16", rounding), target="c", execution_backend="cython")
        assert f"{__file__}:" in str(err.value)


def test_directed_rounding_to_16_bit_floats_uses_cudas_conversions():
    for dtype, prefix in (("float16", "__float2half"), ("bfloat16", "__float2bfloat16")):
        for rounding, suffix in (("rz", "rz"), ("rm", "rd"), ("rp", "ru")):
            source = tilelang.lower(_rounding_kernel(dtype, rounding), target="cuda -arch=sm_80").kernel_source
            assert f"{prefix}_{suffix}(" in source


def test_directed_rounding_to_fp8_is_refused_naming_what_exists():
    with pytest.raises(LoweringError, match="not lowered for CUDA; provided are"):
        tilelang.lower(_rounding_kernel("float8_e4m3fn", "rz"), target="cuda -arch=sm_90")


def test_non_saturating_nearest_cast_runs_on_cpu_and_overflows_to_infinity():
    kernel = tilelang.compile(_rounding_kernel("float16", "rn", sat=False), target="c", execution_backend="cython")
    x = torch.tensor([1.0, -2.5, 70000.0, -1e6] * 32, dtype=torch.float32)
    y = torch.empty(128, dtype=torch.float16)
    kernel(x, torch.zeros(128, dtype=torch.uint32), y)
    torch.testing.assert_close(y, x.to(torch.float16))
    assert torch.isinf(y[2]) and torch.isinf(y[3]) and y[3] < 0


def test_lower_flags_add_host_code_and_a_runtime_module():
    @T.prim_func
    def double(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(16):
                B[i] = A[i] * T.float32(2)

    plain = tilelang.lower(double, target="c")
    assert plain.host_source is None and plain.rt_mod is None
    full = tilelang.lower(double, target="c", enable_host_codegen=True, enable_device_compile=True)
    assert full.host_source and full.rt_mod is not None
