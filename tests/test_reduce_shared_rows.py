"""Reductions into a destination the block shares, one row per thread: ``T.reduce_max(S, D, dim=1)``
of a ``(1, N)`` tile into a ``(1,)`` fragment or shared tile.

Each destination element was accumulated in place (``D[i] = max(D[i], S[i, r])`` in the loop
over ``r``). When ``D`` lives in shared memory (a shared tile, or a fragment the pipeline places
there because it is read outside ``T.Parallel``) and has one element, TVM's ThreadSync saw a
read-modify-write of one shared address in a loop under the ``if threadIdx.x < 1`` guard and
stopped lowering for CUDA with "Cannot insert syncs inside condition". Found by fuzzing
(reductions with ``bm=1`` row tiles, threads 32 and 256). Each element is now accumulated in a
register and stored once.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "reduce_shared_rows_emulator")

ROWS, COLS, THREADS = 6, 8, 32
CASES = [(src, dst, op, clear) for src, dst in (("local", "fragment"), ("fragment", "shared"), ("shared", "fragment"))
         for op, clear in (("max", True), ("sum", False), ("bitor", True))]


def _case_id(case) -> str:
    src, dst, op, clear = case
    return f"{src}-{dst}-{op}-{'clear' if clear else 'accumulate'}"


def _alloc(scope, shape, dtype):
    if scope == "shared":
        return T.alloc_shared(shape, dtype)
    if scope == "fragment":
        return T.alloc_fragment(shape, dtype)
    return T.alloc_local(shape, dtype)


def _kernel(src: str, dst: str, op: str, clear: bool):
    """``R[b] (op)= reduce(A[b, :])``, one block per row, through a (1, COLS) tile and a (1,) destination."""
    reduce = getattr(T, f"reduce_{op}")

    @T.prim_func
    def rows(A: T.Tensor((ROWS, COLS), "int32"), R: T.Tensor((ROWS,), "int32")):
        with T.Kernel(ROWS, threads=THREADS) as bx:
            S = _alloc(src, (1, COLS), "int32")
            D = _alloc(dst, (1,), "int32")
            T.copy(A[bx, 0], S)
            T.copy(R[bx], D)
            reduce(S, D, dim=1, clear=clear)
            T.copy(D, R[bx])

    return rows


def _inputs():
    g = torch.Generator().manual_seed(3)
    return torch.randint(-50, 50, (ROWS, COLS), generator=g, dtype=torch.int32), torch.arange(ROWS, dtype=torch.int32) * 7


def _want(op, clear, a, r):
    if op == "max":
        got = a.amax(1)
    elif op == "sum":
        got = a.sum(1, dtype=torch.int32)
    else:
        got = a[:, 0].clone()
        for k in range(1, COLS):
            got |= a[:, k]
    if not clear:
        got = got + r if op == "sum" else (torch.maximum(got, r) if op == "max" else got | r)
    return got.to(torch.int32)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_lowers_for_cuda(case):
    from tilelang_core.lowering import lower

    src = lower(_kernel(*case), target="cuda").device_source
    assert "__syncthreads()" in src


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_emulated_gpu_matches_torch(case, tmp_path):
    from tilelang_core.lowering import lower

    a, r = _inputs()
    want = _want(case[2], case[3], a, r)
    CU._emulated(lower(_kernel(*case), target="cuda"), tmp_path)(a, r)
    assert torch.equal(r, want), (r, want)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths_match_torch(path):
    for case in CASES:
        a, r = _inputs()
        want = _want(case[2], case[3], a, r)
        compile_on(_kernel(*case), path)(a, r)
        assert torch.equal(r, want), (case, r, want)
