"""``T.gemm`` on CPU targets accumulates rows of C in vector registers (lowering/cpu_gemm_tiles.py).

Before, the product was a K loop around a SIMD loop along C's rows, which loaded and stored C's
vector for every multiply-add: a 512^3 float32 matmul of 64x64x32 tiles took 3.12 ms on
cython/c (2.1x torch.matmul), 6.15 ms on tvm_ffi/c and 11.3 ms on tvm_ffi/llvm; with eight rows
of C accumulated per SIMD lane it takes 1.47 ms, 2.85 ms and 3.8 ms (best of 5 rounds, 2 cores;
llvm also compiled for this CPU now, tests/test_llvm_host_cpu.py).

Each element still takes its products in K order with the same operations, so the results are
the bits of the untiled nest, which ``tl.disable_vectorize`` keeps: the tests compare the two
bit for bit, and with torch.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
import tilelang_core

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

KS = load_private("tileops_kernels")

UNTILED = {"tl.disable_vectorize": True}


def _matmul(M, N, K, bm, bn, bk, dtype="float32", acc="float32", trans_a=False, trans_b=False):
    """tests/tileops_kernels.py's blocked matmul with shared A/B tiles and a fragment C."""
    return KS.matmul(M, N, K, bm, bn, bk, dtype, acc, trans_a, trans_b, style="gpu")


def _run(func, path, inputs, out, **configs):
    backend, target = path
    if configs:
        compile_on(func, path)  # skips when the path is not available
        kernel = tilelang_core.compile(func, target=target, execution_backend=backend, pass_configs=configs)
    else:
        kernel = compile_on(func, path)
    result = out.clone()
    kernel(*inputs, result)
    return result


CASES = {
    "f32 64x64x32": dict(M=128, N=128, K=96, bm=64, bn=64, bk=32),
    "rows left over": dict(M=70, N=48, K=40, bm=70, bn=48, bk=20),  # 70 = 8 * 8 + 6
    "fewer rows than a tile": dict(M=5, N=32, K=16, bm=5, bn=32, bk=16),
    "transposed A and B": dict(M=64, N=64, K=64, bm=32, bn=32, bk=16, trans_a=True, trans_b=True),
    "f64": dict(M=64, N=40, K=32, bm=32, bn=40, bk=16, dtype="float64", acc="float64"),
    "f16 into f32": dict(M=64, N=64, K=64, bm=32, bn=32, bk=32, dtype="float16", acc="float32"),
    "i8 into i32": dict(M=64, N=64, K=64, bm=32, bn=32, bk=32, dtype="int8", acc="int32"),
}


def _inputs(case):
    M, N, K = case["M"], case["N"], case["K"]
    dtype = getattr(torch, case.get("dtype", "float32"))
    make = (lambda *s: torch.randint(-8, 8, s, dtype=dtype)) if not dtype.is_floating_point else \
        (lambda *s: torch.randn(*s).to(dtype))
    a = make(K, M) if case.get("trans_a") else make(M, K)
    b = make(N, K) if case.get("trans_b") else make(K, N)
    ref = (a.t() if case.get("trans_a") else a).to(torch.float64) @ (b.t() if case.get("trans_b") else b).to(torch.float64)
    return (a, b), torch.zeros(M, N, dtype=getattr(torch, case.get("acc", "float32"))), ref


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("name", list(CASES))
def test_tiled_products_are_the_bits_of_the_untiled_nest_and_match_torch(path, name):
    case = CASES[name]
    inputs, out, ref = _inputs(case)
    func = _matmul(**case)
    tiled = _run(func, path, inputs, out)
    untiled = _run(func, path, inputs, out, **UNTILED)
    assert torch.equal(tiled, untiled)
    torch.testing.assert_close(tiled.to(torch.float64), ref, rtol=1e-3, atol=1e-2)


def _source(func, target="c", **configs):
    return tilelang_core.lower(func, target=target, pass_configs=configs or None).device_source


def test_where_the_tiles_are_used():
    src = _source(_matmul(**CASES["f32 64x64x32"]))
    assert "c_rows" in src
    lines = src.splitlines()
    loop = next(n for n, line in enumerate(lines) if "for (int32_t tile_j = 0;" in line)
    assert lines[loop - 2].strip() == "#pragma omp simd"  # the column loop carries the accumulators' lanes
    assert "c_rows" not in _source(_matmul(**CASES["fewer rows than a tile"]))
    assert "c_rows" not in _source(_matmul(**CASES["f32 64x64x32"]), **UNTILED)
    assert "c_rows" not in _source(_matmul(**CASES["f32 64x64x32"]), target="cuda")
    llvm = tilelang_core.lower(_matmul(**CASES["f32 64x64x32"]), target="llvm", consumes=["runtime_module"])
    assert "c_rows" in llvm.runtime_source  # the accumulators of a vectorized column group


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_gemm_reading_c_through_a_view_keeps_the_nest(path):
    """B is a T.view of C's storage: each k must see C as the previous k left it."""

    @T.prim_func
    def self_product(A: T.Tensor((16, 16), "float32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1):
            As = T.alloc_shared((16, 16), "float32")
            Cs = T.alloc_shared((16, 16), "float32")
            Cv = T.view(Cs, (16, 16), "float32")
            T.copy(A, As)
            T.copy(A, Cs)
            T.gemm(As, Cv, Cs)
            T.copy(Cs, C)

    assert "c_rows" not in _source(self_product)
    a = torch.randn(16, 16) * 0.1
    tiled = _run(self_product, path, (a,), torch.zeros(16, 16))
    untiled = _run(self_product, path, (a,), torch.zeros(16, 16), **UNTILED)
    assert torch.equal(tiled, untiled)
