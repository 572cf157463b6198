"""``T.copy`` between a tile of dynamic extent and one of another extent (``A[0:n]`` into a
1024-element shared buffer, as upstream TileLang allows): the common part, ``min`` of the two, is
copied and the rest of the destination keeps its values. Two different static extents stay an
error. Run on the CPU paths against torch, lowered for CUDA and compiled with nvcc, and run on the
emulated GPU of tests/test_tileops_cuda.py."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang_core
import tilelang_core.language as T
from tilelang_core.errors import LoweringError

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda")

CAP = 64  # the static side


def tail_copies(style: str):
    """``A[0:n]`` -> a CAP-element buffer -> ``B``; and the buffer -> ``C[0:n]`` (C has n elements)."""
    n = T.dynamic("n")
    scope = T.alloc_shared if style == "gpu" else T.alloc_local

    @T.prim_func
    def tails(A: T.Tensor((n,), "float32"), B: T.Tensor((CAP,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32 if style == "gpu" else 1):
            S = scope((CAP,), "float32")
            T.fill(S, -1)
            T.copy(A[0:n], S)  # n < CAP: the first n elements; n > CAP: CAP of them
            T.copy(S, B)
            T.copy(S, C[0:n])  # n > CAP: C[CAP:] keeps its values

    return tails


def rows_2d(style: str):
    """A dynamic number of rows of a (m, 8) tensor into an (16, 8) tile and back."""
    m = T.dynamic("m")
    scope = T.alloc_shared if style == "gpu" else T.alloc_local

    @T.prim_func
    def rows(A: T.Tensor((m, 8), "float32"), B: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=32 if style == "gpu" else 1):
            S = scope((16, 8), "float32")
            T.fill(S, 7)
            T.copy(A[0:m, 0:8], S)
            T.copy(S, B)

    return rows


def check_tails(run, sizes) -> None:
    """Call a ``tail_copies`` kernel for each n and compare B and C with what they must hold."""
    for n in sizes:
        k = min(n, CAP)
        a = torch.randn(n)
        b = torch.full((CAP,), float("nan"))
        c = torch.full((n,), 5.0)
        run(a, b, c)
        want_b = torch.full((CAP,), -1.0)
        want_b[:k] = a[:k]
        want_c = torch.full((n,), 5.0)
        want_c[:k] = a[:k]
        torch.testing.assert_close(b, want_b, rtol=0, atol=0)
        torch.testing.assert_close(c, want_c, rtol=0, atol=0)


PATHS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


def _compile(func, backend, target):
    from tilelang_core.backends.selection import select_backend

    try:
        select_backend(backend, target)
    except Exception as exc:  # noqa: BLE001 - backend missing or unavailable here
        pytest.skip(f"{backend} backend not available for {target}: {exc}")
    return tilelang_core.compile(func, target=target, execution_backend=backend)


@pytest.mark.parametrize("backend,target", PATHS, ids=["cython-c", "tvm_ffi-c", "tvm_ffi-llvm"])
def test_a_dynamic_tail_copies_the_common_part_on_cpu(backend, target):
    check_tails(_compile(tail_copies("cpu"), backend, target), (1, 37, CAP, CAP + 29))
    rows = _compile(rows_2d("cpu"), backend, target)
    for m in (3, 16, 20):
        a = torch.randn(m, 8)
        b = torch.zeros(16, 8)
        rows(a, b)
        want = torch.full((16, 8), 7.0)
        want[: min(m, 16)] = a[:16]
        torch.testing.assert_close(b, want, rtol=0, atol=0)


def test_two_different_static_extents_are_still_refused():
    with pytest.raises(LoweringError, match=r"shape mismatch: the source tile has extents \(32,\) and the destination tile \(64,\)"):

        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=1):
                S = T.alloc_local((64,), "float32")
                T.copy(A[0:32], S)


@pytest.fixture(scope="module")
def cuda_artifacts():
    from tilelang_core.lowering import lower

    return {"tails": lower(tail_copies("gpu"), target="cuda"), "rows": lower(rows_2d("gpu"), target="cuda")}


def test_cuda_source_guards_the_dynamic_extent(cuda_artifacts):
    src = cuda_artifacts["tails"].device_source
    assert "__shared__" in src and "< n" in src, src


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_artifacts, tmp_path):
    CU.compile_translation_units(cuda_artifacts, tmp_path)


@CU.emulator
def test_a_dynamic_tail_on_the_emulated_gpu(cuda_artifacts, tmp_path):
    check_tails(CU._emulated(cuda_artifacts["tails"], tmp_path), (5, CAP + 29))


# -- a run-time extent facing a tile dimension of size 1 ----------------------------------------
#
# Found by fuzzing: `T.copy(A[r, c:T.min(n, c + bn)], S)` through a (bn,) tile worked for every bn
# but 1, which was refused ("rank mismatch"): the tile's size-1 dimension is ignored, the run-time
# extent was not. The common part is the one element when the extent is positive, else nothing.


def chunked_rows(bn: int, style: str):
    """``B = A`` row by row, in chunks of ``bn`` columns through a ``(bn,)`` tile."""
    m, n = T.dynamic("m"), T.dynamic("n")
    scope = T.alloc_shared if style == "gpu" else T.alloc_local

    @T.prim_func
    def chunks(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32")):
        with T.Kernel(m, threads=32 if style == "gpu" else 1) as bx:
            S = scope((bn,), "float32")
            for c in T.serial(T.ceildiv(n, bn)):
                T.copy(A[bx, c * bn:T.min(n, c * bn + bn)], S)
                T.copy(S, B[bx, c * bn:T.min(n, c * bn + bn)])

    return chunks


def first_of(style: str):
    """``B[0] = A[0]`` through a one-element tile when ``k > 0``; ``B[0]`` keeps -1 when ``k == 0``."""
    n = T.dynamic("n")
    scope = T.alloc_shared if style == "gpu" else T.alloc_local

    @T.prim_func
    def first(A: T.Tensor((n,), "float32"), B: T.Tensor((1,), "float32"), k: T.int32):
        with T.Kernel(1, threads=32 if style == "gpu" else 1):
            S = scope((1,), "float32")
            T.fill(S, -1)
            T.copy(A[0:k], S)
            T.copy(S, B)

    return first


def check_chunks(run) -> None:
    for m, n in ((3, 5), (1, 1), (2, 0), (4, 17)):
        a = torch.randn(m, n)
        b = torch.full((m, n), float("nan"))
        run(a, b)
        torch.testing.assert_close(b, a, rtol=0, atol=0)


@pytest.mark.parametrize("backend,target", PATHS, ids=["cython-c", "tvm_ffi-c", "tvm_ffi-llvm"])
def test_a_run_time_extent_into_a_one_element_tile_on_cpu(backend, target):
    for bn in (1, 2):
        check_chunks(_compile(chunked_rows(bn, "cpu"), backend, target))
    first = _compile(first_of("cpu"), backend, target)
    a = torch.randn(4)
    for k, want in ((0, -1.0), (3, float(a[0]))):
        b = torch.zeros(1)
        first(a, b, k)
        assert float(b[0]) == want, (k, b)


@CU.emulator
def test_a_run_time_extent_into_a_one_element_tile_on_the_emulated_gpu(tmp_path):
    from tilelang_core.lowering import lower

    check_chunks(CU._emulated(lower(chunked_rows(1, "gpu"), target="cuda"), tmp_path))
    first = CU._emulated(lower(first_of("gpu"), target="cuda"), tmp_path)
    a = torch.randn(4)
    for k, want in ((0, -1.0), (3, float(a[0]))):
        b = torch.zeros(1)
        first(a, b, k)
        assert float(b[0]) == want, (k, b)
