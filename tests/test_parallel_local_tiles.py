"""``T.Parallel`` loops that write per-thread ``T.alloc_local`` tiles (lowering/parallel_locals.py).

On CUDA every ``T.Parallel`` nest was spread over the block's threads, so a nest writing a
``local`` tile left each thread with the elements of its own iterations only: a serial sum over
the tile, a ``T.reduce_sum`` of it, a second ``T.Parallel`` in another order or a ``T.copy`` in
another order read zeros or garbage, silently (one thread per block on ``c``/``llvm`` was right).
Such a nest now runs whole in every thread, as in TileLang; a nest that also stores elsewhere
stays spread, and reading its local tile where another thread wrote the element is a
``LoweringError``. Each kernel runs on every CPU path and on the GPU emulator of
test_tileops_cuda.py (OpenMP threads as the block's threads), against torch; its CUDA source is
compiled with nvcc, and on a device the ``gpu``-marked test runs it there.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402
from source_lines import line_in_function  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_parallel_locals")

M, N = 6, 16


def serial_sum(threads):
    """A local row written by T.Parallel, summed by a serial loop in every thread."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            row = T.alloc_local((N,), "float32")
            total = T.alloc_local((1,), "float32")
            for j in T.Parallel(N):
                row[j] = A[bx, j] * 2
            total[0] = 0
            for j in T.serial(N):
                total[0] += row[j]
            S[bx] = total[0]

    return kernel


def transposed_reader(threads):
    """A (4, 4) local tile written in (i, j) order, read by a T.Parallel in (j, i) order."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            tile = T.alloc_local((4, 4), "float32")
            for i, j in T.Parallel(4, 4):
                tile[i, j] = A[bx, i * 4 + j] + 1
            for j, i in T.Parallel(4, 4):
                B[bx, i * 4 + j] = tile[i, j] * 3

    return kernel


def copy_out(threads):
    """A local tile written column by column, copied out by T.copy (a nest in row order)."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, 4, 4), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            tile = T.alloc_local((4, 4), "float32")
            for j, i in T.Parallel(4, 4):
                tile[i, j] = A[bx, i * 4 + j] - 1
            T.copy(tile, B[bx, 0:4, 0:4])

    return kernel


def reduce_local(threads):
    """T.reduce_sum of a local tile into a local and into a fragment."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), S: T.Tensor((M, 2), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            tile = T.alloc_local((2, 8), "float32")
            sums = T.alloc_local((2,), "float32")
            frag = T.alloc_fragment((2,), "float32")
            for i, j in T.Parallel(2, 8):
                tile[i, j] = A[bx, i * 8 + j]
            T.reduce_sum(tile, sums, dim=1)
            T.reduce_max(tile, frag, dim=1)
            for i in T.Parallel(2):
                S[bx, i] = sums[i] + frag[i]

    return kernel


def spread_with_fragment(threads):
    """A nest that writes a local tile and a fragment stays spread; a second nest of the same
    iteration count reads the local tile where the same thread wrote it."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=threads) as bx:
            tile = T.alloc_local((4, 4), "float32")
            frag = T.alloc_fragment((4, 4), "float32")
            for i, j in T.Parallel(4, 4):
                tile[i, j] = A[bx, i * 4 + j] * 2
                frag[i, j] = tile[i, j] + 1
            for k in T.Parallel(N):
                B[bx, k] = tile[k // 4, k % 4] + frag[k // 4, k % 4]

    return kernel


def _want(name, a):
    if name == "serial_sum":
        return (2 * a).sum(1)
    if name == "transposed_reader":
        return (a + 1) * 3
    if name == "copy_out":
        return (a - 1).reshape(M, 4, 4)
    if name == "reduce_local":
        rows = a.reshape(M, 2, 8)
        return rows.sum(2) + rows.amax(2)
    return 4 * a + 1  # spread_with_fragment


KERNELS = {f.__name__: f for f in (serial_sum, transposed_reader, copy_out, reduce_local, spread_with_fragment)}
OUT_SHAPES = {"serial_sum": (M,), "reduce_local": (M, 2), "copy_out": (M, 4, 4)}
CASES = [(name, threads) for name in KERNELS for threads in (32, 128)]


def _run(run, name):
    a = torch.randn(M, N, generator=torch.Generator().manual_seed(7))
    out = torch.full(OUT_SHAPES.get(name, (M, N)), float("nan"))
    run(a, out)
    torch.testing.assert_close(out, _want(name, a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("name", list(KERNELS))
def test_cpu_paths(name, path):
    _run(compile_on(KERNELS[name](128), path), name)


@CU.emulator
@pytest.mark.parametrize("name,threads", CASES)
def test_emulated_gpu_every_thread_holds_the_whole_local_tile(name, threads, tmp_path):
    _run(CU._emulated(lower(KERNELS[name](threads), target="cuda"), tmp_path), name)


@pytest.mark.gpu
@CU.requires_gpu
@pytest.mark.parametrize("name,threads", CASES)
def test_gpu_every_thread_holds_the_whole_local_tile(name, threads):
    kernel = tilelang.compile(KERNELS[name](threads), target="cuda")

    def run(a, out):
        out_gpu = out.cuda()
        kernel(a.cuda(), out_gpu)
        out.copy_(out_gpu.cpu())

    _run(run, name)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(tmp_path):
    artifacts = {f"{name}_{threads}": lower(KERNELS[name](threads), target="cuda") for name, threads in CASES}
    CU.compile_translation_units(artifacts, tmp_path)


def _kernel_body(art):
    src = art.device_source
    return src[src.rindex("__global__"):]


def test_local_only_nest_is_a_serial_loop_and_fragment_nests_stay_spread():
    body = _kernel_body(lower(transposed_reader(128), target="cuda"))
    # the writer: a loop over all 16 elements in every thread, no thread guard
    assert re.search(r"for \(int i = 0; i < 4; \+\+i\) \{\s*for \(int j = 0; j < 4; \+\+j\)", body), body
    # the reader stores into global memory: spread, one iteration per thread
    assert "threadIdx.x) < 16)" in body, body
    body = _kernel_body(lower(spread_with_fragment(128), target="cuda"))
    assert "for (" not in body and body.count("threadIdx.x) < 16)") == 2, body
    assert re.search(r"float frag(_ptr)?\[1\];", body), body  # the fragment keeps one register per thread


def _read_elsewhere(reader):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=32) as bx:
            row = T.alloc_local((N,), "float32")
            for j in T.Parallel(N):  # WRITER
                row[j] = A[bx, j] * 2
                B[bx, j] = row[j]
            reader(row, S, bx)

    return kernel


@T.macro
def _serial_read(row, S, bx):
    total = T.alloc_local((1,), "float32")
    total[0] = 0
    for j in T.serial(N):
        total[0] += row[j]  # READ
    S[bx] = total[0]


@T.macro
def _reversed_read(row, S, bx):
    for j in T.Parallel(N):
        S[bx] = row[N - 1 - j]  # READ


@T.macro
def _reduce_read(row, S, bx):
    total = T.alloc_local((1,), "float32")
    T.reduce_sum(row, total, dim=0)  # READ
    S[bx] = total[0]


def _line_of(fn, mark: str) -> int:
    return line_in_function(fn, mark, at_end=True)


@pytest.mark.parametrize("reader", [_serial_read, _reversed_read, _reduce_read], ids=lambda r: r.__name__)
def test_local_tile_of_a_spread_nest_read_by_other_threads_is_an_error(reader):
    with pytest.raises(LoweringError) as info:
        lower(_read_elsewhere(reader), target="cuda")
    text = str(info.value)
    assert text.startswith(f"{__file__}:{_line_of(reader, '# READ')}: the local tile 'row' is read here"), text
    assert f"the T.Parallel loop at {__file__}:{_line_of(_read_elsewhere, '# WRITER')} writes it" in text, text
    assert "stores into the global buffer 'B'" in text and "T.alloc_fragment" in text, text
    # on CPU targets (one thread per block) the same kernel is right and lowers
    lower(_read_elsewhere(reader), target="c")
