"""TVM math on the GPU targets (lowering/gpu_math.py): bit counts of every integer width, and the
16-bit float functions TVM 0.27 has no CUDA or Metal rule for.

TVM's CUDA rules count only uint32/uint64 (``popcount``) and 32/64-bit values (``clz``), its Metal
rule ``clz`` of 32/64-bit values only, and 14 float16/bfloat16 functions on CUDA (12 float16 ones
on Metal) did not lower or did not compile. No GPU runs here, so: the sources are checked for the
CUDA and Metal calls and compiled with nvcc and NVRTC, and the rewritten expressions themselves
(the zero extension, the ``clz`` offset, the float32 computation) are run on this CPU through
TVM's LLVM backend and compared with Python and torch. The same kernels run on a CUDA device
where there is one.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering.gpu_math import HALF_WITHOUT_RULE, lower_gpu_math

sys.path.insert(0, str(Path(__file__).resolve().parent))
from math_kernels import FLOAT_OPS, check_float_ops, kernel_module  # noqa: E402
from nvrtc_toolchain import nvrtc_available  # noqa: E402

N = 64
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


def counts(dtype):
    """Y[0] = popcount(X), Y[1] = clz(X), in X's dtype."""

    @T.prim_func
    def bit_counts(X: T.Tensor((N,), dtype), Y: T.Tensor((2, N), dtype)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                Y[0, i] = T.popcount(X[i])
                Y[1, i] = T.clz(X[i])

    return bit_counts


def values(dtype):
    info = np.iinfo(dtype)
    v = np.random.default_rng(11).integers(info.min, info.max, size=N, dtype=dtype, endpoint=True)
    v[:5] = [0, 1, info.max, info.min, info.max // 2 + 1]
    return v


def python_counts(v, dtype):
    bits = np.iinfo(dtype).bits
    masked = [int(x) & ((1 << bits) - 1) for x in v]
    return [bin(m).count("1") for m in masked], [bits - m.bit_length() for m in masked]


def run(kernel, dtype, device="cpu"):
    v = values(dtype)
    y = torch.zeros((2, N), dtype=getattr(torch, dtype), device=device)
    kernel(torch.from_numpy(v).to(device), y)
    return [int(a) for a in y[0].cpu().tolist()], [int(a) for a in y[1].cpu().tolist()]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_width_lowers_for_cuda_to_the_cuda_intrinsics(dtype):
    source = tilelang.lower(counts(dtype), target="cuda").kernel_source
    wide = "ll" if "64" in dtype else ""
    assert f"__popc{wide}(" in source and f"__clz{wide}(" in source, source


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_width_lowers_for_metal(dtype):
    source = tilelang.lower(counts(dtype), target="metal").kernel_source
    assert "popcount(" in source and "clz(" in source, source


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_rewritten_counts_are_right_run_on_this_cpu_through_llvm(dtype):
    func = counts(dtype)
    rewritten = func.with_body(lower_gpu_math(func.body, "cuda"))
    assert not rewritten.body.same_as(func.body) or dtype in ("uint32", "uint64", "int32", "int64")
    kernel = tilelang.compile(rewritten, target="llvm", execution_backend="tvm_ffi")
    assert run(kernel, dtype) == python_counts(values(dtype), dtype)


def test_wide_unsigned_counts_are_left_to_tvm():
    func = counts("uint32")
    assert lower_gpu_math(func.body, "cuda").same_as(func.body)


@pytest.mark.parametrize("backend", [
    pytest.param("cython", marks=pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")),
    pytest.param("nvrtc", marks=pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")),
])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "uint16"])
def test_the_cuda_source_compiles(backend, dtype):
    kernel = tilelang.compile(counts(dtype), target="cuda", execution_backend=backend)
    assert "__popc" in kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")
@pytest.mark.parametrize("dtype", DTYPES)
def test_counts_on_a_cuda_device_match_python(dtype):
    kernel = tilelang.compile(counts(dtype), target="cuda")
    assert run(kernel, dtype, device="cuda") == python_counts(values(dtype), dtype)


# -- 16-bit float math ----------------------------------------------------------------------------

def _half_ops(kind: str) -> list:
    """The FLOAT_OPS whose function TVM has no 16-bit rule for on ``kind``."""
    functions = HALF_WITHOUT_RULE[kind]
    return [op for op in FLOAT_OPS if f"tirx.{op[0][2:op[0].index('(')]}" in functions]


def test_the_ops_cover_every_function_without_a_rule():
    for kind, functions in HALF_WITHOUT_RULE.items():
        assert len(_half_ops(kind)) == len(functions), kind


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_math_lowers_for_cuda_in_float32(tmp_path, dtype):
    ops = _half_ops("cuda")
    module = kernel_module(tmp_path, f"cuda_half_{dtype}", [e for e, _ in ops])
    source = tilelang.lower(module.make(len(ops), dtype), target="cuda").kernel_source
    for call in ("log1pf(", "sinhf(", "asinf(", "fmodf(", "atan2f(", "hypotf(", "nearbyintf(", "ldexpf("):
        assert call in source, (call, source)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_metal_sources_use_only_msl_math_names(tmp_path, dtype):
    # numbers: plugins/metal_backend/tests/test_metal_math_with_standin.py runs these on the stand-in
    module = kernel_module(tmp_path, f"metal_math_{dtype}", [e for e, _ in FLOAT_OPS])
    source = tilelang.lower(module.make(len(FLOAT_OPS), dtype), target="metal").kernel_source
    for call in ("tan(", "atan2(", "ldexp(", "rint(", "tl_log1p(", "tl_hypot(", "static inline float tl_log1p"):
        assert call in source, (call, source)
    for c_name in ("tanf(", "atan2f(", "ldexpf(", "copysignf(", "log1pf(", "hypotf(", "nearbyint(", "log1p(", "hypot("):
        assert c_name not in source.replace("tl_log1p(", "").replace("tl_hypot(", ""), (c_name, source)


@pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_math_for_cuda_compiles_with_nvrtc(tmp_path, dtype):
    ops = _half_ops("cuda")
    module = kernel_module(tmp_path, f"nvrtc_half_{dtype}", [e for e, _ in ops])
    tilelang.compile(module.make(len(ops), dtype), target="cuda", execution_backend="nvrtc")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_16bit_math_for_cuda_compiles_with_nvcc(tmp_path):
    ops = _half_ops("cuda")
    module = kernel_module(tmp_path, "nvcc_half", [e for e, _ in ops])
    tilelang.compile(module.make(len(ops), "float16"), target="cuda", execution_backend="cython")


@pytest.mark.parametrize("kind,dtype", [("cuda", "float16"), ("cuda", "bfloat16")])
def test_the_rewritten_16bit_math_is_right_run_on_this_cpu_through_llvm(tmp_path, kind, dtype):
    ops = _half_ops(kind)
    module = kernel_module(tmp_path, f"cpu_half_{kind}_{dtype}", [e for e, _ in ops])
    func = module.make(len(ops), dtype)
    rewritten = func.with_body(lower_gpu_math(func.body, kind))
    assert not rewritten.body.same_as(func.body)
    kernel = tilelang.compile(rewritten, target="llvm", execution_backend="tvm_ffi")
    check_float_ops(kernel, ops, dtype, f"{kind} rewrite on llvm")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_math_on_a_cuda_device_matches_torch(tmp_path, dtype):
    ops = _half_ops("cuda")
    module = kernel_module(tmp_path, f"gpu_half_{dtype}", [e for e, _ in ops])
    kernel = tilelang.compile(module.make(len(ops), dtype), target="cuda")
    check_float_ops(kernel, ops, dtype, "cuda device", device="cuda")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", ["tan", "atan", "erf", "pow"])
def test_float16_math_of_tvms_half_prelude_compiles_with_nvcc(name):
    """hpow/htan/hatan/herf were defined for nvcc's device pass only: a whole .cu file (cython's
    nvcc build) failed its host pass with 'identifier "htan" is undefined'."""
    import tilelang

    fn = getattr(T, name)

    @T.prim_func
    def half_math(A: T.Tensor((256,), "float16"), B: T.Tensor((256,), "float16")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = fn(A[bx * 128 + i]) if name != "pow" else fn(A[bx * 128 + i], B[bx * 128 + i])

    kernel = tilelang.compile(half_math, target="cuda", execution_backend="cython")
    assert "tilelang: the host pass too" in kernel.get_kernel_source()
