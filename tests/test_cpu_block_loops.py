"""The CPU block loop strategy (issue 11 §6): small kernels run their blocks serially on every CPU
path, large ones through the C source's block launcher (or TVM's parallel runtime).

The C checks compile the generated source with the system compiler and call it through ctypes,
as any backend consuming ``device_source`` would, including one that sets the block launcher.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest
import torch

import tilelang_core.language as T
from tilelang_core.lowering import lower
from tilelang_core.lowering.frontend import PARALLEL_MIN_WORK

CC = shutil.which("cc") or shutil.which("gcc")


def vector_add(N, block=128):
    @T.prim_func
    def vadd(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return vadd


def matmul(M, N, K, bm=16, bn=16):
    @T.prim_func
    def mm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            acc = T.alloc_fragment((bm, bn), "float32")
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = 0.0
            for k in T.serial(K):
                for i, j in T.Parallel(bm, bn):
                    if by * bm + i < M and bx * bn + j < N:
                        acc[i, j] += A[by * bm + i, k] * B[k, bx * bn + j]
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = acc[i, j]

    return mm


def _llvm_ir(func) -> str:
    return lower(func, target="llvm", consumes=["runtime_module"]).tvm_modules.inspect_source("ll")


@pytest.mark.parametrize("func", [vector_add(4096), matmul(32, 32, 8), vector_add(100_000, block=100_000)],
                         ids=["4096-add", "small-matmul", "one-block"])
def test_small_static_kernels_have_serial_block_loops(func):
    """Statically small work (or a single block): no launcher, no OpenMP loop, no TVM parallel
    launch (which alone costs TVM's llvm path ~3 us per call, ~11 us on a busy machine)."""
    art = lower(func, target="c")
    assert art.device_kernels[0].block_launcher is None
    assert "omp parallel" not in art.device_source and "tl_run_blocks" not in art.device_source
    assert "TVMBackendParallelLaunch" not in _llvm_ir(func)


@pytest.mark.parametrize("func", [matmul(256, 256, 256), vector_add(T.dynamic("n"))], ids=["large", "dynamic"])
def test_large_or_dynamic_kernels_get_a_block_launcher(func):
    art = lower(func, target="c")
    (kernel,) = art.device_kernels
    assert kernel.block_launcher == f"{kernel.name}_block_launcher"
    src = art.device_source
    assert f"tl_block_launcher_fn {kernel.block_launcher} = 0;" in src
    assert f"{kernel.name}_blocks0(" in src and "tl_run_blocks(" in src
    assert f"#define TL_PARALLEL_MIN_WORK {PARALLEL_MIN_WORK}LL" in src
    assert "TVMBackendParallelLaunch" in _llvm_ir(func)
    serial = lower(func, target="c", pass_configs={"tl.disable_parallel_blocks": True})
    assert serial.device_kernels[0].block_launcher is None and "tl_run_blocks" not in serial.device_source


def test_dynamic_llvm_kernel_is_right_on_both_sides_of_the_threshold():
    """The runtime module chooses the serial or the parallel copy of the block loop at call time."""
    import tilelang_core

    try:
        kernel = tilelang_core.compile(vector_add(T.dynamic("n")), out_idx=-1, target="llvm", execution_backend="tvm_ffi")
    except Exception as exc:  # noqa: BLE001 - the backend is optional here
        pytest.skip(f"tvm_ffi backend not available: {exc}")
    for n in (1, 1000, PARALLEL_MIN_WORK * 2 + 5):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(kernel(a, b), a + b)


def _build(art, tmp_path, openmp: bool):
    src = tmp_path / f"{art.name}.c"
    lib = tmp_path / f"{art.name}{'_omp' if openmp else ''}.so"
    src.write_text(art.device_source)
    cmd = [CC, "-O2", "-std=c99", "-shared", "-fPIC", "-Wall", "-Werror=implicit-function-declaration", *(["-fopenmp"] if openmp else []),
           str(src), "-o", str(lib)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(lib))


def _call(lib, art, tensors, symbol):
    kernel = art.device_kernels[0]
    fn = getattr(lib, kernel.name)
    fn.restype = ctypes.c_int32
    return fn(*[ctypes.c_void_p(t.data_ptr()) for t in tensors], ctypes.c_int32(symbol))


BLOCKS_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
LAUNCHER_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("openmp", [False, True], ids=["plain-c", "openmp"])
def test_c_entry_runs_its_blocks_without_a_launcher(tmp_path, openmp):
    art = lower(matmul(T.dynamic("m"), 64, 64), target="c")
    lib = _build(art, tmp_path, openmp)
    B = torch.randn(64, 64)
    for m in (5, 300):
        A, C = torch.randn(m, 64), torch.zeros(m, 64)
        assert _call(lib, art, (A, B, C), m) == 0
        torch.testing.assert_close(C, A @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_c_block_launcher_contract(tmp_path):
    """A backend's launcher is called only for work reaching the threshold, with the block count
    and the work estimate, and runs fn(args, begin, end) over every block."""
    art = lower(vector_add(T.dynamic("n")), target="c")
    lib = _build(art, tmp_path, openmp=False)
    calls = []

    @LAUNCHER_FN
    def launcher(blocks, work, fn, args):
        calls.append((blocks, work))
        run = BLOCKS_FN(fn)
        half = blocks // 2  # two ranges, as two threads would take them
        return run(args, 0, half) | run(args, half, blocks)

    slot = ctypes.c_void_p.in_dll(lib, art.device_kernels[0].block_launcher)
    slot.value = ctypes.cast(launcher, ctypes.c_void_p).value
    try:
        for n in (1000, 4 * PARALLEL_MIN_WORK + 3):
            A, B, C = torch.randn(n), torch.randn(n), torch.zeros(n)
            assert _call(lib, art, (A, B, C), n) == 0
            assert torch.equal(C, A + B)
    finally:
        slot.value = None
    blocks = (4 * PARALLEL_MIN_WORK + 3 + 127) // 128
    assert len(calls) == 1 and calls[0][0] == blocks and calls[0][1] >= 4 * PARALLEL_MIN_WORK, calls


# -- grids of more than 2**31 - 1 blocks ----------------------------------------------------------

import pathlib  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, TVMFFI_C, TVMFFI_LLVM, compile_on, path_id  # noqa: E402


def _corner_blocks():
    """Marks whether the first and the last block of an ``n x m`` grid ran."""

    @T.prim_func
    def corners(A: T.Tensor((2,), "int64"), n: T.int32, m: T.int32):
        with T.Kernel(n, m) as (bx, by):
            if bx == 0 and by == 0:
                A[0] = 1
            if bx == n - 1 and by == m - 1:
                A[1] = 1

    return corners


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_LLVM], ids=path_id)
def test_a_2d_grid_of_more_than_int32_blocks_runs_every_block(path):
    """65536 x 32769 blocks (each axis fine, the product over 2**31 - 1): the CPU block loop used
    an int32 flat index and ran no block at all, without an error."""
    kernel = compile_on(_corner_blocks(), path)
    for n, m in [(7, 5), (65536, 32769)]:
        marks = torch.zeros(2, dtype=torch.int64)
        kernel(marks, n, m)
        assert marks.tolist() == [1, 1], (n, m)


def _last_block(block):
    @T.prim_func
    def last(A: T.Tensor((2,), "int64"), n: T.int32):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            if bx == 0:
                A[0] = 1
            if T.Cast("int64", bx) * block + block >= T.Cast("int64", n):
                A[1] = T.Cast("int64", bx)

    return last


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_C, TVMFFI_LLVM], ids=path_id)
def test_grid_extent_near_int32_max_does_not_overflow(path):
    """``T.ceildiv(n, 64)`` with ``n = 2**31 - 1`` is ``(n + 63) // 64``: the sum overflowed int32
    on llvm and no block ran; the count (33554432) fits and every block runs."""
    kernel = compile_on(_last_block(64), path)
    marks = torch.full((2,), -7, dtype=torch.int64)
    kernel(marks, 2**31 - 1)
    assert marks.tolist() == [1, (2**31 - 1 + 63) // 64 - 1]


def test_small_static_grids_keep_an_int32_block_index():
    source = lower(matmul(64, 64, 16), target="c").kernel_source
    assert "int64_t block_idx" not in source and "int32_t block_idx" in source
