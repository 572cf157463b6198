"""Float ``T.reduce_*`` over another dimension than the last, on CPU targets, run row after row
(lowering/lane_reductions.py): ``for r: T.Parallel(j): d[j] = combine(d[j], x[r, j])``.

Before, each column was one chain of dependent operations in a register, one column after
another, reading with a stride: column sums of 64 blocks of (1024, 64) float32 tiles took
4.4-5.0 ms on tvm_ffi/llvm and column maxima 0.60-0.85 ms on cython/c; row after row they take
0.65-1.04 and 0.44-0.50 ms (the inner loop reads a row and vectorizes). Each column still takes its rows in order, so the
results are the bits of the kernel lowered with ``tl.disable_vectorize``, which keeps the
columns (a NaN's sign may differ where the C compiler swaps an addition's operands; these
inputs make none): the tests compare the two bit for bit on the three CPU paths, and with torch.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
import tilelang_core

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id, run_on  # noqa: E402

AS_WRITTEN = {"tl.disable_vectorize": True}
_TORCH = {"float32": torch.float32, "float64": torch.float64}


def _columns(R, C, dtype="float32", op="sum", clear=True, scope="fragment", **options):
    """S[b, j] = op(A[b * R:(b + 1) * R, j]) for 2 blocks (with ``clear=False`` also over S[b, j])."""
    alloc = T.alloc_fragment if scope == "fragment" else T.alloc_shared
    reduce = getattr(T, f"reduce_{op}")

    @T.prim_func
    def columns(A: T.Tensor((2 * R, C), dtype), S: T.Tensor((2, C), dtype)):
        with T.Kernel(2) as bx:
            a = alloc((R, C), dtype)
            s = alloc((C,), dtype)
            T.copy(A[bx * R, 0], a)
            T.copy(S[bx, 0], s)
            reduce(a, s, dim=0, clear=clear, **options)
            T.copy(s, S[bx, 0])

    return columns


def _middle(P, R, C, op="sum"):
    """S[p, j] = op(A[p, :, j]): the middle dimension of a 3-D tile."""
    reduce = getattr(T, f"reduce_{op}")

    @T.prim_func
    def middle(A: T.Tensor((P, R, C), "float32"), S: T.Tensor((P, C), "float32")):
        with T.Kernel(1):
            a = T.alloc_fragment((P, R, C), "float32")
            s = T.alloc_fragment((P, C), "float32")
            T.copy(A, a)
            reduce(a, s, dim=1)
            T.copy(s, S)

    return middle


def _dynamic_rows():
    n = T.dynamic("n")

    @T.prim_func
    def dyn_columns(A: T.Tensor((n, 16), "float32"), S: T.Tensor((16,), "float32")):
        with T.Kernel(1):
            a = T.alloc_fragment((n, 16), "float32")
            s = T.alloc_fragment((16,), "float32")
            T.copy(A, a)
            T.reduce_max(a, s, dim=0)
            T.copy(s, S)

    return dyn_columns


def _bits(x):
    return x.view(torch.int64 if x.dtype == torch.float64 else torch.int32)


def _awkward(shape, dtype):
    """Random values with NaN, infinities and both zeros in some columns."""
    x = torch.randn(*shape, dtype=dtype)
    x[..., 1, 3] = float("nan")
    x[..., :, 5] = float("nan")  # a column of only NaN
    x[..., 2, 7] = float("inf")
    x[..., 0, 8] = float("-inf")
    x[..., :, 9] = -0.0
    x[..., 4, 10] = 0.0
    return x


def _expected(x, op, dim, nan_propagate):
    """torch's ``op`` over ``dim``; max/min/absmax ignore NaN unless ``nan_propagate``."""
    if op in ("sum", "abssum"):
        return (x.abs() if op == "abssum" else x).sum(dim)
    x = x.abs() if op == "absmax" else x
    if not nan_propagate:
        fill = {"max": float("-inf"), "min": float("inf"), "absmax": 0.0}[op]
        x = torch.where(torch.isnan(x), torch.full_like(x, fill), x)
    return x.amin(dim) if op == "min" else x.amax(dim)


CASES = {
    "sum": dict(R=100, C=24),
    "max, nan_propagate, shared, clear=False": dict(R=64, C=16, op="max", scope="shared", clear=False,
                                                    nan_propagate=True),
    "min f64": dict(R=33, C=12, dtype="float64", op="min"),
    "absmax": dict(R=40, C=32, op="absmax"),
    "abssum f64, clear=False": dict(R=50, C=11, dtype="float64", op="abssum", clear=False),
}


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_column_reductions_keep_the_bits_and_match_torch(path, case):
    spec = dict(CASES[case])
    R, C, dtype, op = spec["R"], spec["C"], spec.get("dtype", "float32"), spec.get("op", "sum")
    func = _columns(**spec)
    x = _awkward((2 * R, C), _TORCH[dtype]) if op in ("max", "min", "absmax") else torch.randn(2 * R, C,
                                                                                               dtype=_TORCH[dtype])
    start = torch.randn(2, C, dtype=_TORCH[dtype])
    rows = run_on(func, path, (x,), start)
    columns = run_on(func, path, (x,), start, **AS_WRITTEN)
    assert torch.equal(_bits(rows), _bits(columns)), (rows, columns)
    expected = _expected(x.view(2, R, C), op, 1, spec.get("nan_propagate", False))
    if spec.get("clear") is False:
        expected = expected + start if op in ("sum", "abssum") else torch.where(
            torch.isnan(expected), expected, torch.maximum(expected, start))
    if op in ("sum", "abssum"):
        torch.testing.assert_close(rows, expected)
    else:
        torch.testing.assert_close(rows, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_the_middle_dimension_and_a_dynamic_row_count(path):
    x = torch.randn(3, 40, 20)
    out = run_on(_middle(3, 40, 20), path, (x,), torch.zeros(3, 20))
    assert torch.equal(out, run_on(_middle(3, 40, 20), path, (x,), torch.zeros(3, 20), **AS_WRITTEN))
    torch.testing.assert_close(out, x.sum(1))
    kernel = compile_on(_dynamic_rows(), path)
    for n in (1, 2, 7, 300):
        a = _awkward((n + 11, 16), torch.float32)[:n] if n > 10 else torch.randn(n, 16)
        s = torch.zeros(16)
        kernel(a.contiguous(), s)
        torch.testing.assert_close(s, _expected(a, "max", 0, False), rtol=0, atol=0, msg=f"n={n}")


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_source_on_the_destinations_storage_keeps_the_columns(path):
    """The destination is row 0 of the source (through a T.view): run row after row, the
    destination's first write would change row 0 before the columns read it."""

    @T.prim_func
    def onto_row_0(A: T.Tensor((8, 8), "float32"), S: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            tile = T.alloc_shared((8, 8), "float32")
            view = T.view(tile, (8, 8), "float32")
            T.copy(A, tile)
            T.reduce_sum(view, tile[0, 0:8], dim=0)
            T.copy(tile[0, 0:8], S)

    x = torch.randn(8, 8)
    out = run_on(onto_row_0, path, (x,), torch.zeros(8))
    assert torch.equal(out, run_on(onto_row_0, path, (x,), torch.zeros(8), **AS_WRITTEN))
    torch.testing.assert_close(out, x.sum(0))


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("op", ["sum", "max", "abssum"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_a_local_tile_reduced_into_its_own_row(path, op, dtype):
    """A per-thread (T.alloc_local) destination on the source's storage: with clear=True the
    destination element was set to the identity before it was read as a source element, so
    T.reduce_sum(L, L[0, 0:8], dim=0) gave row 0 = row 1 instead of row 0 + row 1."""
    reduce = getattr(T, f"reduce_{op}")

    @T.prim_func
    def into_row_0(A: T.Tensor((2, 8), dtype), O: T.Tensor((2, 8), dtype)):
        with T.Kernel(1, threads=1):
            L = T.alloc_local((2, 8), dtype)
            T.copy(A, L)
            reduce(L, L[0, 0:8], dim=0)
            T.copy(L, O)

    torch_dtype = getattr(torch, dtype)
    x = (torch.arange(16).reshape(2, 8) - 5).to(torch_dtype)
    out = run_on(into_row_0, path, (x,), torch.zeros(2, 8, dtype=torch_dtype))
    want = x.clone()
    want[0] = {"sum": x.sum(0), "max": x.max(0).values, "abssum": x.abs().sum(0)}[op].to(torch_dtype)
    assert torch.equal(out, want)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_destination_view_of_stride_0_keeps_the_columns(path):
    """Every column of a stride-0 destination view is one element: each column stores its own sum
    there, the last one stays. Row after row, all columns would add into that one element."""

    @T.prim_func
    def into_one(A: T.Tensor((4, 8), "float32"), S: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            tile = T.alloc_fragment((4, 8), "float32")
            sums = T.alloc_shared((8,), "float32")
            T.copy(A, tile)
            T.fill(sums, 0.0)
            T.reduce_sum(tile, T.view(sums, (8,), strides=(0,)), dim=0)
            T.copy(sums, S)

    x = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    out = run_on(into_one, path, (x,), torch.zeros(8))
    assert out[0] == x[:, 7].sum() and torch.all(out[1:] == 0), out


def _source(func, target="c", **configs):
    return tilelang_core.lower(func, target=target, pass_configs=configs or None).device_source


def test_where_the_rows_are_used():
    """The register accumulator (``block_acc``) goes where the columns run row after row."""
    assert "block_acc" not in _source(_columns(64, 16))
    assert "block_acc" not in _source(_columns(64, 16, op="max"), "llvm")
    assert "block_acc" in _source(_columns(64, 16), **AS_WRITTEN)
    assert "block_acc" in _source(_columns(64, 1))  # one column: nothing to vectorize
    assert "block_acc" in _source(_columns(64, 16), "cuda")  # a GPU thread keeps its accumulator
    assert "block_acc" in _source(_columns(64, 16, "int32", op="max"))  # integers: not marked


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_the_generic_reduce_dispatches_on_its_type(path):
    """TileLang's T.reduce(buffer, out, reduce_type, dim, clear): an AttributeError before."""

    @T.prim_func
    def generic(A: T.Tensor((4, 8), "float32"), S: T.Tensor((3, 8), "float32")):
        with T.Kernel(1, threads=1):
            tile = T.alloc_fragment((4, 8), "float32")
            out = T.alloc_fragment((3, 8), "float32")
            T.copy(A, tile)
            T.reduce(tile, out[0, 0:8], "sum", 0, True)
            T.reduce(tile, out[1, 0:8], "max", 0, True, annotations={"nan_propagate": True})
            T.reduce(tile, out[2, 0:8], "absmax", 0, True)
            T.copy(out, S)

    x = torch.randn(4, 8)
    x[1, 3] = float("nan")
    out = run_on(generic, path, (x,), torch.zeros(3, 8))
    torch.testing.assert_close(out[0], x.sum(0), equal_nan=True)
    torch.testing.assert_close(out[1], x.amax(0), equal_nan=True)  # NaN propagated in column 3
    torch.testing.assert_close(out[2, :3], x.abs().amax(0)[:3])


def test_the_generic_reduce_names_the_kinds():
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError, match=r"T.reduce\(tile, out\): reduce_type must be one of 'sum', .*got 'mean'"):

        @T.prim_func
        def unknown(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=1):
                tile = T.alloc_fragment((4, 8), "float32")
                out = T.alloc_fragment((8,), "float32")
                T.reduce(tile, out, "mean", 0, True)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("scope", ["local", "fragment", "shared"])
@pytest.mark.parametrize("clear", [True, False])
def test_a_reduction_into_a_view_its_source_reads_later(path, scope, clear):
    """Row 0's sum is stored into row 1 (through a reshape) before row 1 is summed: in place, row
    1's sum read row 0's result (127 instead of 100, in every scope); it is reduced apart now."""
    alloc = {"local": T.alloc_local, "fragment": T.alloc_fragment, "shared": T.alloc_shared}[scope]

    @T.prim_func
    def into_row_1(A: T.Tensor((2, 8), "float32"), O: T.Tensor((2, 8), "float32")):
        with T.Kernel(1, threads=1):
            L = alloc((2, 8), "float32")
            T.copy(A, L)
            flat = T.reshape(L, (16,))
            T.reduce_sum(L, flat[8:10], dim=1, clear=clear)
            T.copy(L, O)

    x = torch.arange(1.0, 17.0).reshape(2, 8)
    out = run_on(into_row_1, path, (x,), torch.zeros(2, 8))
    want = x.clone()
    want[1, 0:2] = x.sum(1) + (x[1, 0:2] if not clear else 0)
    assert torch.equal(out, want)


def test_a_reduction_apart_lowers_for_cuda():
    from tilelang_core.lowering import lower

    @T.prim_func
    def apart(A: T.Tensor((4, 32), "float32"), O: T.Tensor((4, 32), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((4, 32), "float32")
            T.copy(A, F)
            T.reduce_max(F, F[0, 0:32], dim=0)
            T.copy(F, O)

    assert "__global__" in lower(apart, target="cuda -arch=sm_90").device_source
