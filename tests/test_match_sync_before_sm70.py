"""``T.match_any_sync``/``T.match_all_sync`` for CUDA architectures before sm_70.

``__match_any_sync``/``__match_all_sync`` exist from sm_70 on (documented so), but a kernel
lowered for ``cuda -arch=sm_60`` emitted them bare, for the CUDA compiler to reject. Lowering now
refuses them before sm_70, naming the operator, the target architecture and what is needed; from
sm_70 on they lower (and compile with nvcc) as before.
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

CU = load_private("test_tileops_cuda", "match_sync_before_sm70")

OPS = ("match_any_sync", "match_all_sync")


def _kernel(op: str):
    match = getattr(T, op)

    @T.prim_func
    def matched(A: T.Tensor((64,), "uint32"), B: T.Tensor((64,), "uint32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = match(A[i])

    return matched


@pytest.mark.parametrize("arch", ["sm_60", "sm_61"])
@pytest.mark.parametrize("op", OPS)
def test_match_sync_is_refused_before_sm70(op, arch):
    with pytest.raises(LoweringError, match=rf"T\.{op} needs CUDA sm_70 or later .*the target is {arch}.*cuda -arch=sm_70"):
        lower(_kernel(op), target=f"cuda -arch={arch}")


@pytest.mark.parametrize("arch", ["sm_70", "sm_80"])
@pytest.mark.parametrize("op", OPS)
def test_match_sync_lowers_from_sm70(op, arch):
    assert f"__{op}" in lower(_kernel(op), target=f"cuda -arch={arch}").device_source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_match_sync_compiles_with_nvcc_for_sm75(tmp_path):
    artifacts = {op: lower(_kernel(op), target="cuda -arch=sm_75") for op in OPS}
    CU.compile_translation_units(artifacts, tmp_path, arch="sm_75")
