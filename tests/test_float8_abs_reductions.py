"""``T.abs`` and ``T.reduce_max/min/absmax`` of float8 values.

TVM has no float8 ``abs`` or ``isnan``: ``T.abs`` of a float8 element stopped with TVM's
"DiagnosticError: Data type T.float8_e4m3fn not supported for absolute op", and a float8
``T.reduce_max/min/absmax`` (documented for floats) with "... not supported for isnan op", when
the kernel was defined, on every target. ``T.abs`` now computes in float32 and converts back
(exact), the reductions test NaN in float32, and their float8 starting values print as CUDA
(a float8 infinity constant printed as the undefined ``inff``; float8_e5m2's infinity is now
given by its bits, float8_e4m3fn, which has none, starts from -448/448); so do the copies of a
float8 ``T.alloc_reducer`` of max/min. Checked: the kernels
lower for CUDA and nvcc compiles them (sm_75, sm_80, sm_90); on the CPU targets, which have no
float8 types, the kernels are refused with the TargetFeatureError that says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import TargetFeatureError
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "float8_abs_reductions")

FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
REDUCTIONS = ("reduce_max", "reduce_min", "reduce_absmax")


def _abs_kernel(dtype: str):
    @T.prim_func
    def absolute(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = T.abs(A[i])

    return absolute


def _reduce_kernel(op: str, dtype: str):
    reduce = getattr(T, op)

    @T.prim_func
    def reduced(A: T.Tensor((32, 64), dtype), B: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=128) as _:
            F = T.alloc_fragment((32, 64), dtype)
            R = T.alloc_fragment((32,), dtype)
            T.copy(A, F)
            reduce(F, R, dim=1)
            T.copy(R, B)

    return reduced


def _reducer_kernel(op: str, dtype: str):
    """``T.alloc_reducer`` (v2) of ``op``: its copies start at the op's identity."""

    @T.prim_func
    def reducer(A: T.Tensor((8, 16), dtype), O: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32) as _:
            x = T.alloc_fragment((8, 16), dtype)
            T.copy(A, x)
            acc = T.alloc_reducer((8,), dtype, op=op)
            out = T.alloc_fragment((8,), dtype)
            T.reducer_init(acc)
            for i, j in T.Parallel(8, 16):
                T.reducer_update(acc[i], x[i, j])
            T.finalize_reducer(acc, out)
            T.copy(out, O)

    return reducer


def _kernels():
    return {**{f"abs_{d}": _abs_kernel(d) for d in FLOAT8},
            **{f"{op}_{d}": _reduce_kernel(op, d) for op in REDUCTIONS for d in FLOAT8},
            **{f"reducer_{op}_{d}": _reducer_kernel(op, d) for op in ("max", "min") for d in FLOAT8}}


@pytest.mark.parametrize("dtype", FLOAT8)
def test_float8_abs_is_computed_in_float32(dtype):
    source = lower(_abs_kernel(dtype), target="cuda -arch=sm_80").device_source
    assert "fabsf(((float)A_ptr" in source


@pytest.mark.parametrize("dtype", FLOAT8)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_float8_reductions_lower_without_an_infinity_constant(op, dtype):
    source = lower(_reduce_kernel(op, dtype), target="cuda -arch=sm_80").device_source
    assert "inff" not in source


@pytest.mark.parametrize("dtype", FLOAT8)
@pytest.mark.parametrize("op", ["max", "min"])
def test_float8_reducers_lower_without_an_infinity_constant(op, dtype):
    """A max/min reducer's copies start at -inf/+inf: a float8 one printed CUDA's undefined ``inff``
    (nvcc: identifier "inff" is undefined), so the kernel did not build."""
    source = lower(_reducer_kernel(op, dtype), target="cuda -arch=sm_80").device_source
    assert "inff" not in source


@pytest.mark.parametrize("op,dtype,start", [
    ("reduce_max", "float8_e5m2", "(uchar)252;"),  # -inf by its bits
    ("reduce_min", "float8_e5m2", "(uchar)124;"),  # +inf
    ("reduce_max", "float8_e4m3fn", "__nv_fp8_e4m3(-0x1.cp+8f"),  # -448: no infinity
    ("reduce_max", "float8_e8m0fnu", "__nv_fp8_e8m0(0x1p-127f"),  # its smallest value, 2^-127 (TVM's: 0)
    ("reduce_min", "float8_e8m0fnu", "__nv_fp8_e8m0(0x1p+127f"),  # its largest, 2^127 (TVM's: 2^128)
])
def test_float8_reductions_start_from_the_formats_own_limits(op, dtype, start):
    """The start value is the format's infinity or its finite limit (language/dtype_limits.extreme),
    not TVM's float8 limits, which are wrong for float8_e8m0fnu (no zero, no 2^128 in it)."""
    source = lower(_reduce_kernel(op, dtype), target="cuda -arch=sm_90").device_source
    assert start in source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_float8_abs_and_reductions_compile_with_nvcc(arch, tmp_path):
    artifacts = {name: lower(func, target=f"cuda -arch={arch}") for name, func in _kernels().items()}
    CU.compile_translation_units(artifacts, tmp_path, arch=arch)


@pytest.mark.parametrize("backend,target", [p for p in cpu_pairs() if p.values[0] != "ctypes"])
@pytest.mark.parametrize("kernel", ["abs_float8_e4m3fn", "reduce_max_float8_e5m2", "reduce_absmax_float8_e4m3fn"])
def test_float8_is_refused_clearly_on_cpu(kernel, backend, target):
    func = _kernels()[kernel]
    with pytest.raises(TargetFeatureError, match="CPU targets .* cannot compile"):
        tilelang.compile(func, execution_backend=backend, target=target)
    assert torch.float8_e4m3fn is not None  # torch has the dtypes: the refusal is the targets'
