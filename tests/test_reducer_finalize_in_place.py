"""A v2 reducer (``T.reducer_init(acc, init)``) finalized in place (``T.finalize_reducer(acc)``,
no ``dst``) holds the result combined with ``init``, as a finalize into ``dst`` does
(language/tileops/reducer.py).

Before, the in-place finalize returned without the ``init``: a row sum with ``init=5`` came out 5
short, a ``bitxor`` with ``init=5`` wrong in its low bits, silently, on every target. Found by the
operator fuzzer. The kernels run on the three CPU paths, their CUDA source compiles with ``nvcc
-c``, and the GPU version (128 threads, the copies combined through shared memory) runs on the
emulated GPU.
"""

from __future__ import annotations

import functools
import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "reducer_finalize_emulator")

M, N, INIT = 4, 40, 5
OPS = {
    "sum": lambda row: sum(row) + INIT,
    "max": lambda row: max(max(row), INIT),
    "min": lambda row: min(min(row), INIT),
    "bitxor": lambda row: functools.reduce(lambda a, b: a ^ b, row, INIT),
    "bitor": lambda row: functools.reduce(lambda a, b: a | b, row, INIT),
}


def _kernel(op, threads):
    @T.prim_func
    def finalize_in_place(A: T.Tensor((M, N), "int32"), O: T.Tensor((M,), "int32"), Both: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            x = T.alloc_fragment((M, N), "int32")
            T.copy(A, x)
            acc = T.alloc_reducer((M,), "int32", op=op)
            T.reducer_init(acc, INIT)
            for i, j in T.Parallel(M, N):
                T.reducer_update(acc[i], x[i, j])
            T.finalize_reducer(acc)
            T.copy(acc, O)
            # the same through a destination tile, for comparison
            acc2 = T.alloc_reducer((M,), "int32", op=op)
            out = T.alloc_fragment((M,), "int32")
            T.reducer_init(acc2, INIT)
            for i, j in T.Parallel(M, N):
                T.reducer_update(acc2[i], x[i, j])
            T.finalize_reducer(acc2, out)
            T.copy(out, Both)

    return finalize_in_place


def _inputs():
    g = torch.Generator().manual_seed(7)
    return torch.randint(-100, 100, (M, N), generator=g, dtype=torch.int32), torch.zeros(M, dtype=torch.int32), torch.zeros(M, dtype=torch.int32)


def _check(op, a, o, both):
    want = [OPS[op](row) for row in a.tolist()]
    assert o.tolist() == want, (op, o.tolist(), want)
    assert both.tolist() == want, (op, both.tolist(), want)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths_combine_the_init_once(path, op):
    a, o, both = _inputs()
    compile_on(_kernel(op, 1), path)(a, o, both)
    _check(op, a, o, both)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_compiles_with_nvcc(tmp_path):
    from tilelang_core.lowering import lower

    CU.compile_translation_units({op: lower(_kernel(op, 128), target="cuda") for op in ("sum", "bitxor")}, tmp_path)


@CU.emulator
@pytest.mark.parametrize("op", ["sum", "max", "bitxor"])
def test_emulated_gpu_combines_the_init_once_per_result(op, tmp_path):
    from tilelang_core.lowering import lower

    a, o, both = _inputs()
    CU._emulated(lower(_kernel(op, 128), target="cuda"), tmp_path)(a, o, both)
    _check(op, a, o, both)


def test_a_bool_bitand_reducer_starts_true():
    """A bool ``bitand`` reducer started from -1, which TVM refused as a bool ("-1 exceeds range of
    bool"); reducers now take T.reduce_*'s start values (reduce.identity), where bool ``bitand`` is
    True, logical and's identity."""

    @T.prim_func
    def all_rows(A: T.Tensor((4, 8), "bool"), B: T.Tensor((4,), "bool")):
        with T.Kernel(1) as _:
            a = T.alloc_fragment((4, 8), "bool")
            T.copy(A, a)
            acc = T.alloc_reducer((4,), "bool", op="bitand")
            out = T.alloc_fragment((4,), "bool")
            T.reducer_init(acc)
            for i, j in T.Parallel(4, 8):
                T.reducer_update(acc[i], a[i, j])
            T.finalize_reducer(acc, out)
            T.copy(out, B)

    kernel = tilelang.compile(all_rows, target="c", execution_backend="cython")
    a = torch.ones(4, 8, dtype=torch.bool)
    a[1, 3] = a[3, 7] = False
    b = torch.zeros(4, dtype=torch.bool)
    kernel(a, b)
    assert b.tolist() == [True, False, True, False]
