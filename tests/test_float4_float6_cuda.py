"""float4/float6 tensors on CUDA: refused where CUDA has no type, arithmetic and math in float32.

Lowering accepted float6_e2m3fn/float6_e3m2fn and float4_e2m1fn on every CUDA architecture, but
TVM's prelude has cuda_fp6.h only from sm_100 ('identifier "__nv_fp6_e2m3" is undefined' below)
and cuda_fp4.h needs the bfloat16 types TVM drops below sm_80; ``*``, ``+``, ``T.max`` on them
never compiled ('no operator "*"', 'no instance of "max"') and ``T.exp`` stopped with an internal
error. Checked: float6 below sm_100 and float4 below sm_80 are refused naming dtype, architecture
and what is needed; casts, arithmetic, ``T.max`` and ``T.exp`` (computed in float32 and rounded
back, lowering/float8_cuda.py) compile with nvcc for float4 on sm_80 and float6 on sm_100a.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "float4_float6_cuda")

N = 64
OPS = ("cast", "arith", "max", "exp")


def _kernel(dtype: str, op: str):
    src = "float32" if op == "cast" else dtype

    @T.prim_func
    def narrow(A: T.Tensor((N,), src), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                if op == "cast":
                    B[i] = T.cast(A[i], dtype)
                elif op == "arith":
                    B[i] = A[i] * A[i] + A[i] - B[i]
                elif op == "max":
                    B[i] = T.max(A[i], B[i])
                else:
                    B[i] = T.exp(A[i])

    return narrow


@pytest.mark.parametrize("dtype,arch,needs", [
    ("float6_e2m3fn", "sm_75", "sm_100"), ("float6_e3m2fn", "sm_90", "sm_100"), ("float6_e2m3fn", "sm_90a", "sm_100"),
    ("float4_e2m1fn", "sm_75", "sm_80"),
])
@pytest.mark.parametrize("op", ["cast", "arith"])
def test_narrow_float_refused_before_the_arch_with_its_type(dtype, arch, needs, op):
    with pytest.raises(LoweringError, match=f"uses {dtype} .*cannot compile for {arch}.*needs {needs} or newer"):
        lower(_kernel(dtype, op), target=f"cuda -arch={arch}")


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("dtypes,arch", [(("float4_e2m1fn",), "sm_80"), (("float4_e2m1fn",), "sm_90"),
                                         (("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"), "sm_100a")])
def test_narrow_float_casts_arithmetic_and_math_compile_with_nvcc(dtypes, arch, tmp_path):
    artifacts = {f"{dtype}_{op}": lower(_kernel(dtype, op), target=f"cuda -arch={arch}") for dtype in dtypes for op in OPS}
    CU.compile_translation_units(artifacts, tmp_path, arch=arch)
