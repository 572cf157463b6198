"""``T.atomic_add(dst, shared_tile, use_tma=True)``: bulk reductions through the TMA unit on CUDA
sm_90 and later (language/tileops/tma_atomic.py, lowering/tma_atomics.py).

It used to be an ordinary atomic per element on every CUDA architecture, so a kernel asking for
TMA got none, and upstream TileLang's refusals (architectures before sm_90, dtypes the bulk
reduction cannot add) were missing. The CUDA sources are compiled with nvcc for sm_90 (ptxas
checks the PTX), and run on the emulated GPU of test_tileops_cuda.py, whose bulk-reduction
helper adds the row inside the atomics' critical section and whose readiness check is the real
one; a real device runs the ``gpu`` tests.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch
import tvm

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "tma_atomic_emulator")

from tilelang_core.language.tileops.tma_atomic import TMA_ADD_DTYPES, TmaAtomicError  # noqa: E402
from tilelang_core.lowering import lower  # noqa: E402

SM90 = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})


def _repeated(dtype="float32", shape=(16, 16), times=4):
    """The whole of ``out`` plus ``times`` times a tile of ones (one block)."""

    @T.prim_func
    def tma_repeated(out: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared(shape, dtype)
            T.fill(tile, 1)
            for _ in range(times):
                T.atomic_add(out, tile, use_tma=True)

    return tma_repeated


def _tiles(block=16):
    """``Out[r, c] += 1000 * r + c`` in block x block tiles over a dynamic (n, m) matrix: partial
    tiles at the edges, whose shared tiles hold values past the matrix too (they must not land)."""
    N, M = T.dynamic("n"), T.dynamic("m")

    @T.prim_func
    def tma_tiles(Out: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), threads=64) as (bx, by):
            tile = T.alloc_shared((block, block), "float32")
            for i, j in T.Parallel(block, block):
                tile[i, j] = T.Cast("float32", (by * block + i) * 1000 + bx * block + j)
            T.atomic_add(Out[by * block, bx * block], tile, use_tma=True)

    return tma_tiles


def _tiles_case(m, device="cpu"):
    """The matrix (37, m) of :func:`_tiles` inside a larger zeroed storage, its expected result,
    and the storage's tail (which must stay zero)."""
    storage = torch.zeros(37 * m + 64, device=device)
    out = storage[: 37 * m].view(37, m)
    out.copy_(torch.randn(37, m, device=device))
    r, c = torch.meshgrid(torch.arange(37, device=device), torch.arange(m, device=device), indexing="ij")
    return out, out + (1000 * r + c).float(), storage[37 * m:]


def _column():
    """A column tile: no run along the last dimension, so one atomic per element."""

    @T.prim_func
    def tma_column(A: T.Tensor((32, 8), "float32"), Out: T.Tensor((32, 8), "float32")):
        with T.Kernel(8, threads=32) as bx:
            tile = T.alloc_shared((32,), "float32")
            for i in T.Parallel(32):
                tile[i] = A[i, bx]
            T.atomic_add(Out[0:32, bx], tile, use_tma=True)

    return tma_column


def _lower_sm(func, arch):
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    return lower(func, target=target)


# -- the CUDA source ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", TMA_ADD_DTYPES)
def test_each_dtype_lowers_to_a_bulk_reduction_on_sm90(dtype):
    src = _lower_sm(_repeated(dtype), "sm_90").device_source
    suffix = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "int32": "i32", "uint32": "u32", "uint64": "u64"}[dtype]
    assert f"tl_tma_store_add_{suffix}(" in src
    ptx = {"float16": "add.noftz.f16", "bfloat16": "add.noftz.bf16", "float32": "add.f32", "int32": "add.s32",
           "uint32": "add.u32", "uint64": "add.u64"}[dtype]
    assert f"cp.reduce.async.bulk.global.shared::cta.bulk_group.{ptx} " in src
    body = src[src.index('extern "C" __global__'):]
    # the fence and a barrier before one thread issues the rows; a barrier after it has waited
    assert body.index("tl_tma_store_fence();") < body.index("__syncthreads();") < body.index("threadIdx.x) < 1")
    assert body.index("tl_tma_store_wait();") < body.rindex("__syncthreads();")


def test_a_whole_contiguous_tile_is_one_bulk_reduction():
    src = _lower_sm(_repeated("float32", (16, 16)), "sm_90").device_source
    assert "tl_tma_store_add_f32((&(out_ptr[0])), (&(tile_ptr[0])), 256);" in src


def test_a_column_tile_is_updated_element_by_element():
    src = _lower_sm(_column(), "sm_90").device_source
    assert "tl_tma_store_add" not in src and "tl_atomic_add_f32_relaxed(" in src


def test_rows_that_are_never_16_bytes_are_updated_element_by_element():
    src = _lower_sm(_repeated("float32", (5, 3)), "sm_90").device_source
    assert "tl_tma_store_add" not in src and "tl_atomic_add_f32_relaxed(" in src


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_the_sm90_sources_compile_with_nvcc(tmp_path):
    kernels = {f"repeated_{d}": _lower_sm(_repeated(d), "sm_90") for d in TMA_ADD_DTYPES}
    kernels["tiles"] = _lower_sm(_tiles(), "sm_90")
    kernels["column"] = _lower_sm(_column(), "sm_90")
    CU.compile_translation_units(kernels, tmp_path, arch="sm_90")


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_75"])
def test_architectures_before_sm90_are_refused(arch):
    for func in (_repeated(), _column()):  # bulk rows and the element-by-element form alike
        with pytest.raises(TmaAtomicError, match=r"TMA atomic add requires a CUDA target with TMA support \(SM90\+\); "
                                                 rf"the target is {arch}") as info:
            _lower_sm(func, arch)
        assert isinstance(info.value, tvm.error.InternalError)  # what TileLang raises
        assert "test_tma_atomic_add.py:" in str(info.value)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_targets_refuse_use_tma(path):
    with pytest.raises(TmaAtomicError, match=r"use_tma=True\) needs a GPU target with TMA"):
        compile_on(_repeated(), path)


def test_a_gpu_target_without_tma_refuses_use_tma():
    with pytest.raises(TmaAtomicError, match=r"needs a GPU target with TMA \(CUDA sm_90 or later\); the metal target has none"):
        lower(_repeated(), target="metal")


@pytest.mark.parametrize("dtype", ["int16", "int64", "float64", "float32x2"])
def test_dtypes_the_bulk_reduction_cannot_add_are_refused_when_defined(dtype):
    with pytest.raises(TmaAtomicError, match=rf"TMA atomic add does not support dtype {dtype}; supported scalar "
                                             "dtypes: float16, bfloat16, float32, int32, uint32, uint64"):

        @T.prim_func
        def unsupported(out: T.Tensor((16, 16), dtype)):
            with T.Kernel(1, threads=128):
                tile = T.alloc_shared((16, 16), dtype)
                T.atomic_add(out, tile, use_tma=True)


def _fallbacks():
    """Updates the bulk unit cannot do, each one element by element."""

    @T.prim_func
    def tma_fallbacks(out: T.Tensor((16, 16), "float32"), src: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            frag = T.alloc_fragment((16, 16), "float32")
            acc = T.alloc_shared((16, 16), "float32")
            half = T.alloc_shared((16, 16), "float16")
            tile = T.alloc_shared((16, 16), "float32")
            T.fill(frag, 1)
            T.fill(half, 2)
            T.fill(tile, 4)
            T.fill(acc, 0)
            T.atomic_add(out, frag, use_tma=True)  # a fragment value
            T.atomic_add(out, src, use_tma=True)  # a global value
            T.atomic_add(out, half, use_tma=True)  # another dtype
            T.atomic_add(out, tile, memory_order="release", use_tma=True)  # another memory order
            T.atomic_add(acc, tile, use_tma=True)  # a shared destination
            T.atomic_add(out[0:16, 0:16], 8.0, use_tma=True)  # a scalar value
            T.sync_threads()
            T.atomic_add(out, acc, use_tma=True)  # the only bulk one

    return tma_fallbacks


def test_what_the_bulk_unit_cannot_do_is_updated_element_by_element():
    src = _lower_sm(_fallbacks(), "sm_90").device_source
    assert src.count("tl_tma_store_add_f32((&(out_ptr[0])), (&(acc_ptr[0])), 256);") == 1
    assert src.count("tl_tma_store_add_f32(") == 2  # that call and the helper's definition


@CU.emulator
def test_emulated_gpu_runs_the_element_by_element_forms(tmp_path):
    out, src = torch.zeros(16, 16), torch.full((16, 16), 16.0)
    CU._emulated(_lower_sm(_fallbacks(), "sm_90"), tmp_path)(out, src)
    want = torch.full((16, 16), 1 + 16 + 2 + 4 + 8 + 4.0)
    assert torch.equal(out, want), out


# -- run: emulated GPU, then a device ---------------------------------------------------------------


@CU.emulator
def test_emulated_gpu_adds_the_tile_each_time(tmp_path):
    out = torch.full((16, 16), 0.5)
    CU._emulated(_lower_sm(_repeated("float32", times=16), "sm_90"), tmp_path)(out)
    assert torch.equal(out, torch.full((16, 16), 16.5))


@CU.emulator
@pytest.mark.parametrize("m", [40, 37])  # rows of 160 bytes (bulk) and of 148 bytes (misaligned: per element)
def test_emulated_gpu_adds_partial_tiles_at_the_edges(m, tmp_path):
    out, want, tail = _tiles_case(m)
    CU._emulated(_lower_sm(_tiles(), "sm_90"), tmp_path)(out)
    torch.testing.assert_close(out, want)
    assert not tail.any()


@CU.emulator
def test_emulated_gpu_adds_a_column_tile(tmp_path):
    a, out = torch.randn(32, 8), torch.randn(32, 8)
    want = out + a
    CU._emulated(_lower_sm(_column(), "sm_90"), tmp_path)(a, out)
    torch.testing.assert_close(out, want)


def _strided(kind):
    """``Out[i, j] += 100 * i + j + 1`` where one of the buffers is not row-major: ``"columns"`` (a
    column-major destination), ``"padded"`` (rows 24 elements apart), ``"dynamic"`` (a run-time
    row stride: a slice of a wider tensor), ``"view"`` (a transposed view of the shared tile)."""
    s0 = T.dynamic("s0")
    layout = {"columns": T.StridedTensor((16, 16), (1, 16), "float32"), "padded": T.StridedTensor((16, 16), (24, 1), "float32"),
              "dynamic": T.StridedTensor((16, 16), (s0, 1), "float32"), "view": T.Tensor((16, 16), "float32")}[kind]

    @T.prim_func
    def tma_strided(Out: layout):
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((16, 16), "float32")
            for i, j in T.Parallel(16, 16):
                if kind == "view":
                    tile[j, i] = T.Cast("float32", 100 * i + j + 1)
                else:
                    tile[i, j] = T.Cast("float32", 100 * i + j + 1)
            if kind == "view":
                T.atomic_add(Out, T.view(tile, (16, 16), strides=(1, 16)), use_tma=True)
            else:
                T.atomic_add(Out, tile, use_tma=True)

    return tma_strided


def _strided_out(kind):
    """The destination of :func:`_strided`, the storage it lives in (zeroed), and the expected result."""
    if kind in ("columns", "view"):
        storage = torch.zeros(16, 16)
        out = storage.t() if kind == "columns" else storage
    else:
        storage = torch.zeros(16, 24 if kind == "padded" else 40)
        out = storage[:, 8:24] if kind == "dynamic" else storage[:, :16]
    i, j = torch.meshgrid(torch.arange(16), torch.arange(16), indexing="ij")
    return out, storage, (100 * i + j + 1).float()


@pytest.mark.parametrize("kind", ["columns", "padded", "dynamic", "view"])
def test_strided_buffers_are_never_read_as_row_major(kind):
    src = _lower_sm(_strided(kind), "sm_90").device_source
    body = src[src.index('extern "C" __global__'):]
    if kind in ("columns", "view"):  # no contiguous run: element by element
        assert "tl_tma_store_add" not in src
    else:  # one bulk reduction per row; the rows are not merged
        assert ", 16);" in body[body.index("tl_tma_store_add_f32("):] and ", 256);" not in body


@CU.emulator
@pytest.mark.parametrize("kind", ["columns", "padded", "dynamic", "view"])
def test_emulated_gpu_adds_into_and_from_strided_buffers(kind, tmp_path):
    out, storage, want = _strided_out(kind)
    CU._emulated(_lower_sm(_strided(kind), "sm_90"), tmp_path)(out)
    assert torch.equal(out, want)
    assert int((storage != 0).sum()) == 256  # nothing written outside the destination


def test_inside_a_branch_the_tile_is_updated_element_by_element_without_barriers():
    """A block barrier inside ``if tx < 32`` would be reached by some threads only."""

    @T.prim_func
    def tma_in_branch(out: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            tile = T.alloc_shared((16, 16), "float32")
            T.fill(tile, 1)
            if tx < 32:
                T.atomic_add(out, tile, use_tma=True)

    src = _lower_sm(tma_in_branch, "sm_90").device_source
    body = src[src.index('extern "C" __global__'):]
    assert "tl_tma_store" not in body and body.count("__syncthreads()") == 1  # the one after T.fill


requires_sm90 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0), reason="needs a CUDA device of sm_90 or later"
)


@pytest.mark.gpu
@requires_sm90
def test_gpu_tma_atomic_add_on_a_device():
    import tilelang_core

    out = torch.zeros(16, 16, device="cuda")
    tilelang_core.compile(_repeated("float32", times=16), target="cuda")(out)
    torch.testing.assert_close(out, torch.full_like(out, 16.0), rtol=0, atol=0)
    for m in (40, 37):
        out, want, tail = _tiles_case(m, "cuda")
        tilelang_core.compile(_tiles(), target="cuda")(out)
        torch.testing.assert_close(out, want)
        assert not tail.any()
