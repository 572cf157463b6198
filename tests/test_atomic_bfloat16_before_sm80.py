"""bfloat16 atomics for CUDA architectures before sm_80 (no native bfloat16 atomicAdd there).

Their lowering takes the destination's address through ``tvm_access_ptr(..., B.data, ...)``,
where ``B.data`` is a call in TVM 0.27, not a variable: the shared-memory hazard scan asked it for
a name, and every bfloat16 atomic of an sm_75 kernel stopped with "'Call' object has no attribute
'name'" (lowering/shared_hazards.py). Each form lowers now and the source compiles with nvcc for
sm_75; the forms also lower for sm_90.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "atomic_bfloat16_before_sm80")

N = 64
FORMS = ("atomic_add", "atomic_addx2", "atomic_addx4", "atomic_add_prev", "atomic_addx2_prev", "atomic_addx4_prev",
         "shared_atomic_add")


def _kernel(form: str):
    @T.prim_func
    def bf16_atomics(A: T.Tensor((N,), T.bfloat16), B: T.Tensor((N,), T.bfloat16), Prev: T.Tensor((N,), T.bfloat16)):
        with T.Kernel(1, threads=32) as _:
            if form == "atomic_add":
                T.atomic_add(B[1], A[1])
            elif form == "atomic_addx2":
                for i in T.Parallel(N // 2):
                    T.atomic_addx2(B[i * 2], A[i * 2])
            elif form == "atomic_addx4":
                for i in T.Parallel(N // 4):
                    T.atomic_addx4(B[i * 4], A[i * 4])
            elif form == "atomic_add_prev":
                Prev[0] = T.atomic_add(B[0], A[0], return_prev=True)
            elif form == "atomic_addx2_prev":
                Prev[0:2] = T.atomic_addx2(B[0:2], A[0:2], return_prev=True)
            elif form == "atomic_addx4_prev":
                Prev[0:4] = T.atomic_addx4(B[0:4], A[0:4], return_prev=True)
            else:
                S = T.alloc_shared((N,), T.bfloat16)
                T.clear(S)
                for i in T.Parallel(N):
                    T.atomic_add(S[i % 4], A[i])
                T.copy(S, B)

    return bf16_atomics


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("form", FORMS)
def test_bfloat16_atomic_lowers(form, arch):
    source = lower(_kernel(form), target=f"cuda -arch={arch}").device_source
    assert "__global__" in source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_bfloat16_atomics_compile_with_nvcc_for_sm75(tmp_path):
    artifacts = {f"bf16_{form}": lower(_kernel(form), target="cuda -arch=sm_75") for form in FORMS}
    CU.compile_translation_units(artifacts, tmp_path, arch="sm_75")
