"""Float ``T.reduce_sum/abssum/max/min/absmax`` on CPU targets keep several partial results
(lowering/lane_reductions.py): independent chains the compilers vectorize.

Before, a row sum was one chain of dependent float additions in the written order, which no C
compiler may reorder: a 1024 x 1024 row sum of 16-row fragments took 487 us on cython/c and 924 us
on tvm_ffi/c, 16x and 31x torch.sum; a 4096 x 1024 row sum now takes a sixth of the time, a row max
a tenth (``bench/cpu_backends.py`` times both against torch).
Each test here checks a result against torch on the three CPU paths; the accuracy test fails
with one chain (each ``1.0`` after ``1e8`` is lost there).
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


def _rows(M, N, dtype="float32", acc="float32", op="sum", clear=True, scope="fragment", **options):
    """S[i] = op(A[i, :]) (with ``clear=False`` also over S[i]) over fragments of 8 rows."""
    alloc = T.alloc_fragment if scope == "fragment" else T.alloc_shared
    reduce = getattr(T, f"reduce_{op}")

    @T.prim_func
    def rows(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), acc)):
        with T.Kernel(T.ceildiv(M, 8)) as bx:
            a = alloc((8, N), dtype)
            s = alloc((8,), acc)
            T.copy(A[bx * 8, 0], a)
            T.copy(S[bx * 8], s)
            reduce(a, s, dim=1, clear=clear, **options)
            T.copy(s, S[bx * 8])

    return rows


def _columns(M, N):
    """S[j] = sum(A[:, j]): the reduced dim is the first one, into a local tile."""

    @T.prim_func
    def columns(A: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(1):
            a = T.alloc_local((M, N), "float32")
            s = T.alloc_local((N,), "float32")
            T.copy(A, a)
            T.reduce_sum(a, s, dim=0)
            T.copy(s, S)

    return columns


def _dynamic_rows(op="sum", clear=True):
    n = T.dynamic("n")
    reduce = getattr(T, f"reduce_{op}")

    @T.prim_func
    def dyn_rows(A: T.Tensor((4, n), "float32"), S: T.Tensor((4,), "float32")):
        with T.Kernel(1):
            a = T.alloc_fragment((4, n), "float32")
            s = T.alloc_fragment((4,), "float32")
            T.copy(A, a)
            T.copy(S, s)
            reduce(a, s, dim=1, clear=clear)
            T.copy(s, S)

    return dyn_rows


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("N", [1000, 1024, 63, 64, 100])
def test_float32_row_sums_match_torch(path, N):
    A = torch.randn(16, N)
    S = torch.zeros(16)
    compile_on(_rows(16, N), path)(A, S)
    torch.testing.assert_close(S, A.sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_sum_keeps_far_more_of_the_small_terms_than_one_chain(path):
    """Row 0 is 1e8 then 1023 ones (exact sum 100001023): in one chain every 1.0 after 1e8 rounds
    away (float32 steps by 8 there), giving 1e8; with 32 partial sums only lane 0's 31 ones are."""
    A = torch.ones(8, 1024)
    A[:, 0] = 1e8
    S = torch.zeros(8)
    compile_on(_rows(8, 1024), path)(A, S)
    assert torch.all(S == 100000992.0), S


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_clear_false_abssum_and_float64_add_onto_the_destination(path):
    A = torch.randn(8, 300, dtype=torch.float64)
    S = torch.full((8,), 5.0, dtype=torch.float64)
    compile_on(_rows(8, 300, "float64", "float64", clear=False), path)(A, S)
    torch.testing.assert_close(S, A.sum(1) + 5.0)
    B = torch.randn(8, 300)
    R = torch.zeros(8)
    compile_on(_rows(8, 300, op="abssum", scope="shared"), path)(B, R)
    torch.testing.assert_close(R, B.abs().sum(1), rtol=1e-5, atol=1e-4)


def _nan_ignored(x, op):
    fill = {"max": float("-inf"), "min": float("inf"), "absmax": 0.0}[op]
    x = x.abs() if op == "absmax" else x
    x = torch.where(torch.isnan(x), torch.full_like(x, fill), x)
    return x.amin(1) if op == "min" else x.amax(1)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("op", ["max", "min", "absmax"])
def test_max_min_absmax_match_torch_and_keep_nan_rules(path, op):
    A = torch.randn(16, 1000)
    A[1, 5] = float("nan")  # ignored
    A[2, :] = float("nan")  # a row of only NaN: the identity
    A[3, 999] = 50.0 if op != "min" else -50.0  # the extreme in the last (tail) element
    A[4, 0] = float("inf") if op != "min" else float("-inf")
    S = torch.zeros(16)
    compile_on(_rows(16, 1000, op=op), path)(A, S)
    assert torch.equal(S, _nan_ignored(A, op)), (S, _nan_ignored(A, op))
    P = torch.zeros(16)
    compile_on(_rows(16, 1000, op=op, nan_propagate=True), path)(A, P)
    assert torch.isnan(P[1]) and torch.isnan(P[2]) and not torch.isnan(P[0])
    keep = [i for i in range(16) if i not in (1, 2)]
    assert torch.equal(P[keep], _nan_ignored(A, op)[keep])


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_max_with_clear_false_keeps_a_larger_destination(path):
    A = torch.randn(8, 256, dtype=torch.float64)
    S = torch.tensor([100.0, -100.0] * 4, dtype=torch.float64)
    expected = torch.maximum(S, A.amax(1))
    compile_on(_rows(8, 256, "float64", "float64", op="max", clear=False), path)(A, S)
    assert torch.equal(S, expected)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_sums_accumulate_in_float32_lanes(path, dtype):
    tdtype = getattr(torch, dtype)
    A = torch.randn(8, 512).to(tdtype)
    S = torch.zeros(8, dtype=tdtype)
    compile_on(_rows(8, 512, dtype, dtype), path)(A, S)
    torch.testing.assert_close(S, A.float().sum(1).to(tdtype))


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_columns_and_dynamic_extents(path):
    A = torch.randn(100, 8)
    S = torch.zeros(8)
    compile_on(_columns(100, 8), path)(A, S)
    torch.testing.assert_close(S, A.sum(0), rtol=1e-5, atol=1e-4)
    kernel = compile_on(_dynamic_rows(), path)
    for n in (1, 31, 64, 65, 1000):
        A = torch.randn(4, n)
        S = torch.full((4,), 9.0)
        kernel(A, S)
        torch.testing.assert_close(S, A.sum(1), rtol=1e-5, atol=1e-4, msg=f"n={n}")


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_signed_zeros_infinities_and_nans(path):
    A = torch.zeros(8, 256)
    A[0] = -0.0
    A[1, 7] = float("inf")
    A[2, 300 % 256] = float("nan")
    A[3, 1], A[3, 2] = float("inf"), float("-inf")
    S = torch.full((8,), 3.0)
    compile_on(_rows(8, 256), path)(A, S)
    assert S[0] == 0.0 and not torch.signbit(S[0])  # clear=True starts from +0.0, as one chain did
    assert S[1] == float("inf") and torch.isnan(S[2]) and torch.isnan(S[3]) and torch.all(S[4:] == 0.0)
    N = torch.full((8, 256), -0.0)
    Z = torch.full((8,), -0.0)
    compile_on(_rows(8, 256, clear=False), path)(N, Z)
    assert torch.all(Z == 0.0) and torch.all(torch.signbit(Z))  # -0.0 plus negative zeros stays -0.0


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_clear_false_keeps_a_destination_no_number_beats(path):
    """A negative absmax destination stays when the row's |x| are smaller or NaN (partial results
    started at absmax's identity 0 replaced it); a NaN destination stays NaN for a row of only NaN
    (NaN ignored) and for an empty row (partial results started at -inf replaced it)."""
    A = torch.full((8, 256), float("nan"))
    A[1, 7] = 0.5
    A[2] = 1e-3
    S = torch.tensor([-3.0, -3.0, -3.0, float("nan"), -0.0, -1e-30, float("-inf"), 2.0])
    expected = torch.tensor([-3.0, 0.5, 1e-3, float("nan"), 0.0, -1e-30, float("-inf"), 2.0])
    out = S.clone()
    compile_on(_rows(8, 256, op="absmax", clear=False), path)(A, out)
    torch.testing.assert_close(out, expected, rtol=0, atol=0, equal_nan=True)
    for op in ("max", "min", "absmax"):
        kernel = compile_on(_dynamic_rows(op=op, clear=False), path)
        for n in (0, 1, 100):
            row = torch.full((4, n), float("nan"))
            out = torch.tensor([float("nan"), -2.0, 5.0, float("nan")])
            kernel(row, out)
            assert torch.isnan(out[0]) and torch.isnan(out[3]) and out[1] == -2.0 and out[2] == 5.0, (op, n, out)


def _source(func, target, **configs):
    art = tilelang_core.lower(func, target=target, pass_configs=configs or None)
    return art.device_source


def test_where_the_partial_sums_are_used():
    cpu = _source(_rows(16, 1024), "c")
    assert "lane_parts" in cpu and "-0.000000e+00f" in cpu
    assert "lane_parts" not in _source(_rows(16, 32), "c")  # under 2 x 32 iterations: one chain
    assert "lane_parts" not in _source(_rows(16, 1024, "int32", "int32"), "c")  # exact in any order
    assert "lane_parts" not in _source(_columns(1000, 8), "c")  # strided: partial sums were 4x slower
    assert "lane_parts" not in _source(_rows(16, 1024), "c", **{"tl.disable_vectorize": True})
    assert "lane_parts" in _source(_rows(16, 1024, op="max"), "c")
    assert "lane_parts" in _source(_rows(16, 1024, op="min", nan_propagate=True), "c")
    cuda = _source(_rows(16, 1024), "cuda")
    assert "lane_parts" not in cuda and "block_acc" in cuda  # a GPU thread keeps one accumulator


def test_a_sum_written_as_a_loop_keeps_its_order():
    """Only T.reduce_sum/abssum may be reordered; a loop the kernel writes keeps its order."""

    @T.prim_func
    def written(A: T.Tensor((8, 1024), "float32"), S: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            for i in T.serial(8):
                acc = T.alloc_var("float32")
                acc = 0.0
                for j in T.serial(1024):
                    acc = acc + A[i, j]
                S[i] = acc

    assert "lane_parts" not in _source(written, "c")


@pytest.mark.parametrize("op", ["max", "sum"])
def test_the_lane_loops_are_simd_loops_on_c(op):
    """Each lane loop of a split reduction (start, chunk, and the 16/8/4/2 fold) gets ``#pragma
    omp simd`` on target ``c``: GCC unrolled the fold loops into about 31 scalar selects per row
    (a float32 row maximum of 2048 x 2048 on cython/c: 8.3 ms, 5.0 ms with the pragmas). The lanes
    are independent, so the results are the same bits (the tests above check them against torch)."""
    func = _rows(8, 256, op=op)
    source = tilelang_core.lower(func, target="c").kernel_source
    lines = source.splitlines()
    lane_loops = [n for n, line in enumerate(lines) if line.lstrip().startswith("for (") and " lane" in line]
    assert len(lane_loops) >= 5
    assert all("#pragma omp simd" in lines[n - 2] for n in lane_loops), "\n".join(lines)
    untouched = tilelang_core.lower(func, target="llvm").kernel_source
    assert "tl.simd_lanes" not in untouched
