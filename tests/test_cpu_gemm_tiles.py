"""``T.gemm`` on target ``llvm`` accumulates rows of C in vector registers (lowering/cpu_gemm_tiles.py).

Before, the product was a K loop around a SIMD loop along C's rows, which loaded and stored C's
vector for every multiply-add: a 512^3 float32 matmul of 64x64x32 tiles took 11.3 ms on
tvm_ffi/llvm; with eight rows of C per vector group it takes 3.8 ms (best of 5 rounds, 2 cores;
llvm also compiled for this CPU now, tests/test_llvm_host_cpu.py). Target ``c`` keeps the nest:
the same form under ``#pragma omp simd`` gave wrong sums with GCC 12.2 (the case
``test_the_case_gcc_vectorized_wrongly_is_right_on_every_path``).

Each element still takes its products in K order with the same operations, so the results are
the bits of the untiled nest, which ``tl.disable_vectorize`` keeps: the tests compare the two
bit for bit on every CPU path, and with torch.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
import tilelang_core

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id, run_on  # noqa: E402
from private_modules import load_private  # noqa: E402

KS = load_private("tileops_kernels")

UNTILED = {"tl.disable_vectorize": True}


def _matmul(M, N, K, bm, bn, bk, dtype="float32", acc="float32", trans_a=False, trans_b=False):
    """tests/tileops_kernels.py's blocked matmul with shared A/B tiles and a fragment C."""
    return KS.matmul(M, N, K, bm, bn, bk, dtype, acc, trans_a, trans_b, style="gpu")


CASES = {
    "f32 64x64x32": dict(M=128, N=128, K=96, bm=64, bn=64, bk=32),
    "rows left over": dict(M=70, N=48, K=40, bm=70, bn=48, bk=20),  # 70 = 8 * 8 + 6
    "fewer rows than a tile": dict(M=5, N=32, K=16, bm=5, bn=32, bk=16),
    "transposed A and B": dict(M=64, N=64, K=64, bm=32, bn=32, bk=16, trans_a=True, trans_b=True),
    "transposed B": dict(M=64, N=48, K=40, bm=32, bn=48, bk=20, trans_b=True),
    "transposed B, f16 into f32": dict(M=48, N=32, K=32, bm=16, bn=32, bk=32, dtype="float16", acc="float32",
                                       trans_b=True),
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
    tiled = run_on(func, path, inputs, out)
    untiled = run_on(func, path, inputs, out, **UNTILED)
    assert torch.equal(tiled, untiled)
    torch.testing.assert_close(tiled.to(torch.float64), ref, rtol=1e-3, atol=1e-2)


def _source(func, target="c", **configs):
    return tilelang_core.lower(func, target=target, pass_configs=configs or None).device_source


def _llvm_ir(func, **configs):
    return tilelang_core.lower(func, target="llvm", consumes=["runtime_module"], pass_configs=configs or None).runtime_source


def test_where_the_tiles_are_used():
    assert "c_rows" in _llvm_ir(_matmul(**CASES["f32 64x64x32"]))
    assert "c_rows" not in _llvm_ir(_matmul(**CASES["fewer rows than a tile"]))
    assert "c_rows" not in _llvm_ir(_matmul(**CASES["f32 64x64x32"]), **UNTILED)
    assert "c_rows" not in _source(_matmul(**CASES["f32 64x64x32"]))  # target c keeps the nest
    assert "c_rows" not in _source(_matmul(**CASES["f32 64x64x32"]), target="cuda")


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_c_view_of_stride_0_keeps_the_nest(path):
    """Every row of C is row 0 of the storage (a stride-0 view): each product adds onto the same
    row, 8 x 2 ones for every element. Groups of rows would keep 8 copies of that row and store
    them one after another, the last one winning (2 instead of 16)."""

    @T.prim_func
    def onto_one_row(A: T.Tensor((8, 2), "float32"), B: T.Tensor((2, 8), "float32"), C: T.Tensor((8, 8), "float32")):
        with T.Kernel(1):
            As = T.alloc_shared((8, 2), "float32")
            Bs = T.alloc_shared((2, 8), "float32")
            Cs = T.alloc_shared((8, 8), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.fill(Cs, 0.0)
            T.gemm(As, Bs, T.view(Cs, (8, 8), strides=(0, 1)))
            T.copy(Cs, C)

    out = run_on(onto_one_row, path, (torch.ones(8, 2), torch.ones(2, 8)), torch.zeros(8, 8))
    assert torch.all(out[0] == 16.0) and torch.all(out[1:] == 0.0), out


def _regions(N):
    """C[2:11, 3:3 + N] += A[2:11, 1:3] @ B[1:1 + N, 2:4].T, every operand a region at an offset."""

    @T.prim_func
    def regions(A: T.Tensor((11, 5), "float32"), B: T.Tensor((N + 1, 4), "float32"),
                C: T.Tensor((11, N + 3), "float32")):
        with T.Kernel(1, threads=64):
            As = T.alloc_shared((11, 5), "float32")
            Bs = T.alloc_shared((N + 1, 4), "float32")
            Cl = T.alloc_fragment((11, N + 3), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.copy(C, Cl)
            T.gemm(As[2:11, 1:3], Bs[1:N + 1, 2:4], Cl[2:11, 3:N + 3], transpose_B=True)
            T.copy(Cl, C)

    return regions


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("N", [3, 8])
def test_the_case_gcc_vectorized_wrongly_is_right_on_every_path(path, N):
    """N = 3, K = 2, B transposed, C a region at (2, 3): under a `#pragma omp simd` column loop
    around the K loop, GCC 12.2 -O2/-O3 gave other sums than the nest (found by fuzzing). With
    N = 8, llvm groups the columns (9 rows: one group, one left over)."""
    func = _regions(N)
    a, b, c = torch.randn(11, 5), torch.randn(N + 1, 4), torch.randn(11, N + 3)
    expected = c.clone()
    expected[2:11, 3:N + 3] += a[2:11, 1:3] @ b[1:N + 1, 2:4].t()
    out = run_on(func, path, (a, b), c)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(out, run_on(func, path, (a, b), c, **UNTILED))


def _sequential_product(a, b_t):
    """``a @ b_t.T`` summed over K one product at a time, in float32: the kernel's own order."""
    acc = torch.zeros(a.shape[0], b_t.shape[0])
    for k in range(a.shape[1]):
        acc = acc + a[:, k, None] * b_t[None, :, k]
    return acc


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_per_thread_gemm_of_a_transposed_b_reads_it_along_k(path):
    """A local (per-thread) C with ``transpose_B``: B is (N, K), so the i-k-j nest read it with a
    stride of K elements at every step of its innermost loop, which no compiler vectorizes (a
    512^3 float32 matmul of 128x128x32 tiles: 335 ms on cython/c, 48 ms with i-j-k, 41 and 31 ms
    on tvm_ffi/llvm). Each element of C still takes its products in K order: the same bits."""
    M, N, K = 48, 40, 24
    func = KS.matmul(M, N, K, 16, 8, 12, "float32", "float32", False, True, style="cpu")
    source = tilelang_core.lower(func, target="c").kernel_source
    lines = source.splitlines()
    product = next(n for n, line in enumerate(lines) if "B_t" in line and "C_t" in line and " * " in line)
    innermost = next(line for line in reversed(lines[:product]) if line.lstrip().startswith("for ("))
    assert "< 12;" in innermost, innermost  # the K tile's loop
    a, b = torch.randn(M, K), torch.randn(N, K)
    assert torch.equal(run_on(func, path, (a, b), torch.zeros(M, N)), _sequential_product(a, b))


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_a_transposed_b_is_read_from_a_copy_along_c_rows(target):
    """A fragment C with ``transpose_B``: B is read as ``B[j, k]``, a stride of K elements along
    C's rows, in the innermost loop (target c: 512^3 float32, 128x128x32 tiles: 59 ms, 15 ms with
    the copy; llvm 16.5 and 12.9 ms). The tile is copied transposed once per gemm
    (lowering/cpu_gemm_tiles.py ``copy_gemm_operands``); the bits are the untiled nest's (above)."""
    func = _matmul(64, 48, 40, 32, 48, 20, trans_b=True)
    source = tilelang_core.lower(func, target=target).kernel_source
    assert "B_t_t" in source  # the copy of the B tile B_t
    untiled = tilelang_core.lower(func, target=target, pass_configs=UNTILED).kernel_source
    assert "B_t_t" not in untiled


def test_a_float16_b_is_widened_once_per_gemm_on_target_c():
    """GCC 12 converts ``_Float16`` to float one element at a time (no vector conversion without
    AVX512-FP16), so a float16 gemm into float32 ran its innermost loop scalar on target c
    (512^3 in 64x64x32 tiles: 291 ms on cython/c, 12 ms on tvm_ffi/llvm). The B tile is now
    widened into a float32 copy once per gemm (``copy_gemm_operands``), which the loop reads as
    vectors: 8-12 ms. A float16 value widens exactly, so the bits are the untiled nest's (the
    ``f16 into f32`` case above). LLVM vectorizes the conversion itself: llvm keeps the nest."""
    func = _matmul(64, 64, 64, 32, 32, 32, dtype="float16", acc="float32")
    source = tilelang_core.lower(func, target="c").kernel_source
    assert "float B_t_t[" in source.replace("_ptr", "")  # the widened copy of the B tile B_t
    assert "B_t_t" not in tilelang_core.lower(func, target="c", pass_configs=UNTILED).kernel_source
    assert "B_t_t" not in _llvm_ir(func)


LOCAL_CASES = {
    "f16 into f32": dict(M=64, N=48, K=40, bm=32, bn=16, bk=20, dtype="float16", acc="float32"),
    "f16 into f64, A transposed": dict(M=32, N=24, K=16, bm=16, bn=24, bk=8, dtype="float16", acc="float64",
                                       trans_a=True),
    "f16 into f16": dict(M=32, N=32, K=16, bm=16, bn=16, bk=8, dtype="float16", acc="float16"),
}


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("name", list(LOCAL_CASES))
def test_a_per_thread_float16_gemm_is_the_bits_of_the_plain_nest(path, name):
    """A local (per-thread) C of float16 operands, upstream's CPU gemm: on target c each float16
    operand widened into a float copy once per gemm (below) gives the bits of the plain nest (of
    finite inputs: with NaNs, GCC's vector code may order an add's operands otherwise, and x86
    keeps the first operand's NaN, so only a NaN's sign bit may differ)."""
    case = LOCAL_CASES[name]
    inputs, out, ref = _inputs(case)
    func = KS.matmul(case["M"], case["N"], case["K"], case["bm"], case["bn"], case["bk"], case["dtype"],
                     case["acc"], case.get("trans_a", False), False, style="cpu")
    widened = run_on(func, path, inputs, out)
    plain = run_on(func, path, inputs, out, **UNTILED)
    assert torch.equal(widened, plain)
    tolerance = dict(rtol=2e-2, atol=2e-1) if case["acc"] == "float16" else dict(rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(widened.to(torch.float64), ref, **tolerance)


def test_a_per_thread_float16_gemm_widens_its_operands_once_on_target_c():
    """Upstream's CPU gemm (float16 tiles in T.alloc_local, a float32 C) ran its innermost loop
    scalar on target c: GCC 12 has no vector float16 conversion, and the whole loop needs one
    (512^3 in 64x64x32 tiles: 73 ms on cython/c, 12.6 on tvm_ffi/llvm). Each float16 operand is
    now widened into a copy once per gemm (``copy_gemm_operands``), and the loop runs on float
    vectors: 15 ms. llvm vectorizes the conversion itself and keeps the nest; so does a float16 C."""
    def source(dtype, acc, target="c", **configs):
        func = KS.matmul(64, 64, 64, 32, 32, 32, dtype, acc, False, False, style="cpu")
        return tilelang_core.lower(func, target=target, pass_configs=configs or None).kernel_source

    widened = source("float16", "float32").replace("_ptr", "")
    assert "float A_t_w[" in widened and "float B_t_w[" in widened
    assert "_w_ptr" not in source("float16", "float32", **UNTILED)
    assert "_w_ptr" not in source("float16", "float16") + source("float32", "float32")
    assert "A_t_w" not in _llvm_ir(KS.matmul(64, 64, 64, 32, 32, 32, "float16", "float32", False, False, style="cpu"))
