"""Warp shuffles (``T.shfl_sync/xor/down/up``) of float8 values on CUDA.

CUDA has no ``__shfl_*_sync`` overload for ``__nv_fp8_e4m3``/``__nv_fp8_e5m2``: a float8 shuffle
lowered on every architecture, and nvcc rejected the source ("no instance of overloaded function
__shfl_xor_sync matches the argument list"). A float8 value is now shuffled by its bits, widened
to a 32-bit integer and narrowed back (as the warp reductions carry 8-bit integers). Checked: the
sources of every shuffle of both float8 formats, and of the other 8/16-bit dtypes (int8, uint8,
bool, float16, bfloat16), compile with nvcc; the float8 shuffle moves an unsigned 32-bit value.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "float8_shuffles")

OPS = ("shfl_sync", "shfl_xor", "shfl_down", "shfl_up")
FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
NARROW = ("int8", "uint8", "bool", "float16", "bfloat16")


def _kernel(op: str, dtype: str):
    shuffle = getattr(T, op)

    @T.prim_func
    def shuffled(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = shuffle(A[i], 1)

    return shuffled


@pytest.mark.parametrize("dtype", FLOAT8)
@pytest.mark.parametrize("op", OPS)
def test_float8_shuffle_moves_the_bits_as_uint32(op, dtype):
    source = lower(_kernel(op, dtype), target="cuda -arch=sm_80").device_source
    call = "__shfl_sync(" if op == "shfl_sync" else f"__{op}_sync("
    assert call in source
    assert f"{call}(uint)4294967295, ((uint)" in source  # the value's bits, widened to 32 bits


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_float8_shuffles_compile_with_nvcc(arch, tmp_path):
    artifacts = {f"{op}_{dtype}": lower(_kernel(op, dtype), target=f"cuda -arch={arch}")
                 for op in OPS for dtype in FLOAT8}
    CU.compile_translation_units(artifacts, tmp_path, arch=arch)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_other_narrow_shuffles_compile_with_nvcc(tmp_path):
    artifacts = {f"{op}_{dtype}": lower(_kernel(op, dtype), target="cuda -arch=sm_80")
                 for op in OPS for dtype in NARROW}
    CU.compile_translation_units(artifacts, tmp_path, arch="sm_80")
