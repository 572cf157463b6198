"""Directed-rounding casts (``T.cast(x, dtype, round="rz"/"rm"/"rp")``) on CUDA before sm_80.

They were lowered to a bare call of ``__float2bfloat16_rz/_rd/_ru`` (and ``__float2half_*``),
declared by cuda_bf16.h. Below sm_80 TVM stores bfloat16 as ``ushort`` and its preamble no longer
includes cuda_bf16.h, so nvcc (and NVRTC) refused every such bfloat16 cast for sm_75 with
'identifier "__float2bfloat16_rz" is undefined'. The conversion is now a helper whose source
includes its header itself (lowering/casts.py). Checked: each mode to bfloat16 and float16 lowers
with that helper for sm_75 and sm_90, and the sources compile with nvcc for sm_75 and sm_80.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "directed_rounding_before_sm80")

N = 64
MODES = {"rz": "rz", "rm": "rd", "rp": "ru"}
DTYPES = {"bfloat16": "__float2bfloat16", "float16": "__float2half"}


def _kernel(dtype: str, mode: str):
    @T.prim_func
    def directed(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=N) as _:
            for i in T.Parallel(N):
                B[i] = T.cast(A[i], dtype, round=mode)

    return directed


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("mode", sorted(MODES))
def test_directed_rounding_source_includes_its_header(mode, dtype, arch):
    source = lower(_kernel(dtype, mode), target=f"cuda -arch={arch}").device_source
    header = "cuda_bf16.h" if dtype == "bfloat16" else "cuda_fp16.h"
    call = f"{DTYPES[dtype]}_{MODES[mode]}("
    assert call in source
    assert source.index(f"#include <{header}>") < source.index(call)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_75", "sm_80"])
def test_directed_rounding_compiles_with_nvcc(arch, tmp_path):
    artifacts = {f"{dtype}_{mode}": lower(_kernel(dtype, mode), target=f"cuda -arch={arch}")
                 for dtype in DTYPES for mode in MODES}
    CU.compile_translation_units(artifacts, tmp_path, arch=arch)
