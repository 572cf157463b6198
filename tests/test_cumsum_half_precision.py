"""``T.cumsum`` into a float16/bfloat16 tile keeps its running sum in float32, as torch does.

Rounded to the tile's dtype after every addition, the sum stalled and stuck: in float16,
``1 + 0.001 + 0.001 + ...`` stayed ``1.0`` (each 0.001 is less than half the spacing at 1.0), and
``[65504, 65504, -65504]`` gave ``[65504, inf, inf]`` where torch gives ``[65504, inf, 65504]``
(the float32 sum is 131008, then 65504). Each output is now rounded from the float32 sum and
equals ``torch.cumsum`` bit for bit, in every memory (shared, fragment, local), forwards and
``reverse``, on the CPU paths; the CUDA source compiles with nvcc.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "cumsum_half_precision")

ROWS, N = 2, 64
#: the pairs whose backends take 16-bit float tensors (the retired ctypes backend does not)
PAIRS = [p for p in cpu_pairs() if p.values[0] != "ctypes"]


def scan_kernel(dtype: str, memory: str, reverse: bool):
    @T.prim_func
    def half_cumsum(A: T.Tensor((ROWS, N), dtype), B: T.Tensor((ROWS, N), dtype)):
        with T.Kernel(1, threads=32):
            if memory == "shared":
                t = T.alloc_shared((ROWS, N), dtype)
            elif memory == "fragment":
                t = T.alloc_fragment((ROWS, N), dtype)
            else:
                t = T.alloc_local((ROWS, N), dtype)
            T.copy(A, t)
            T.cumsum(t, dim=1, reverse=reverse)
            T.copy(t, B)

    return half_cumsum


def _inputs(torch_dtype) -> torch.Tensor:
    rows = torch.tensor([[65504.0, 65504.0, -65504.0] + [1.0] * (N - 3), [1.0] + [1e-3] * (N - 1)])
    return rows.to(torch_dtype)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("memory", ["shared", "fragment", "local"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("backend,target", PAIRS)
def test_half_cumsum_equals_torch(backend, target, dtype, memory, reverse):
    torch_dtype = getattr(torch, dtype)
    a = _inputs(torch_dtype)
    kernel = tilelang.compile(scan_kernel(dtype, memory, reverse), target=target, execution_backend=backend)
    b = torch.zeros_like(a)
    kernel(a, b)
    expected = a.flip(1).cumsum(1).flip(1) if reverse else a.cumsum(1)
    assert torch.equal(b, expected), (b[:, :6], expected[:, :6])


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_half_cumsum_cuda_source_compiles_with_nvcc(tmp_path):
    artifacts = {f"cumsum_{d}_{m}": lower(scan_kernel(d, m, False), target="cuda")
                 for d in ("float16", "bfloat16") for m in ("shared", "fragment", "local")}
    CU.compile_translation_units(artifacts, tmp_path)
