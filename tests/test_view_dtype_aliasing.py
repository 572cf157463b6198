"""``T.view`` with another dtype on the CPU paths: the C entry reads and writes one array through
two pointer types (``S_ptr[v] = A_ptr[...]`` then ``((int64_t*)S_ptr)[v]``). Under GCC's strict
aliasing (-O3) the reads through the view were moved before the stores or dropped, so on target
``c`` (cython and tvm_ffi) the view of a per-thread tile returned whatever the stack held. The C
source now turns type-based alias analysis off (``#pragma GCC optimize("no-strict-aliasing")``).
"""

from __future__ import annotations

import sys
import pathlib

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

CASES = [("float64", "int64", "local"), ("float32", "int32", "local"), ("int32", "float32", "shared"),
         ("float32", "int16", "local"), ("int64", "float32", "shared")]
TORCH = {"float64": torch.float64, "int64": torch.int64, "float32": torch.float32, "int32": torch.int32,
         "int16": torch.int16}


def _view_kernel(src, dst, scope, n=8, blocks=3):
    nv = n * torch.tensor([], dtype=TORCH[src]).element_size() // torch.tensor([], dtype=TORCH[dst]).element_size()
    alloc = T.alloc_local if scope == "local" else T.alloc_shared

    @T.prim_func
    def view_kernel(A: T.Tensor((blocks, n), src), O: T.Tensor((blocks, nv), dst)):
        with T.Kernel(blocks, threads=1) as bx:
            S = alloc((n,), src)
            T.copy(A[bx, 0], S)
            V = T.view(S, (nv,), dst)
            T.copy(V, O[bx, 0])

    return view_kernel, nv


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("src,dst,scope", CASES, ids=lambda v: str(v))
def test_view_of_a_tile_reads_the_bits_just_stored(path, src, dst, scope):
    func, nv = _view_kernel(src, dst, scope)
    kernel = compile_on(func, path)
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(3, 8, generator=g, dtype=torch.float64) * 1000).to(TORCH[src])
    o = torch.zeros(3, nv, dtype=TORCH[dst])
    kernel(a, o)
    assert torch.equal(o.view(torch.uint8), a.view(torch.uint8))  # bit for bit (NaN payloads too)


def test_c_source_turns_off_type_based_aliasing():
    from tilelang_core.lowering import lower

    func, _ = _view_kernel("float64", "int64", "local")
    src = lower(func, target="c").device_source
    assert '#pragma GCC optimize("no-strict-aliasing")' in src
    assert "((int64_t*)S" in src  # the view is a pointer cast of the tile, read after the stores
