"""On-chip tile sizes checked once simplified (lowering/tile_sizes.py ``CheckTileSizes``), and
``T.vectorized`` loops whose extent simplified to 0 (lowering/vector_lanes.py).

Found by fuzzing kernel definitions. Before: ``T.alloc_local((bx,), ...)`` in a one-block grid
(``bx`` is 0) stopped C and CUDA code generation with TVM's "Check failed: constant_size > 0 ...
Can only handle constant size stack allocation for now" (no tile, no line), and ``llvm`` compiled a
zero-size tile that the kernel then wrote out of bounds; a local or shared tile of a run-time size
stopped CUDA code generation with "Check failed: (dim_imm) is false"; ``T.vectorized(bx)`` in a
one-block grid stopped llvm and CUDA with "Failed to vectorize loop with extent 0". Run-time sizes
stay legal on CPU targets (the tile comes from the heap) and for ``shared.dyn`` on CUDA; an extent
that simplifies to a constant >= 1 is legal everywhere.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from source_lines import marked_line  # noqa: E402


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


n = T.dynamic("n")


@T.prim_func
def one_block(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):  # <one-block-kernel>
    with T.Kernel(1, threads=1) as bx:
        L = T.alloc_local((bx,), "float32")  # <one-block-tile>
        L[0] = A[0]
        B[0] = L[0]


def _empty_message(target: str) -> str:
    return (f"{_THIS}:{_line_of('one-block-kernel')}: lowering kernel 'one_block' for {target} failed: "
            f"{_THIS}:{_line_of('one-block-tile')}: T.alloc_local: the tile 'L' (T.alloc_local((bx,), \"float32\")) "
            "has the shape (0,) once simplified, no element: every extent must be at least 1 (an extent that is 0 "
            "for every block, such as the block index of a one-block grid, gives an empty tile); give the tile a "
            "constant size")


@pytest.mark.parametrize("target", ["c", "llvm", "cuda"])
def test_a_tile_of_no_element_once_simplified_names_the_allocation(target):
    with pytest.raises(LoweringError) as info:
        lower(one_block, target=target)
    assert str(info.value) == _empty_message(target)


@T.prim_func
def run_time_local(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):  # <local-kernel>
    with T.Kernel(1, threads=1) as _:
        L = T.alloc_local((n,), "float32")  # <local-tile>
        for i in T.serial(n):
            L[i] = A[i] * 3.0
        for i in T.serial(n):
            B[n - 1 - i] = L[i]


@T.prim_func
def run_time_shared(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):  # <shared-kernel>
    with T.Kernel(1, threads=1) as _:
        S = T.alloc_shared((n,), "float32")  # <shared-tile>
        for i in T.serial(n):
            S[i] = A[i] + 1.0
        for i in T.serial(n):
            B[i] = S[i]


@T.prim_func
def run_time_fragment(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):  # <fragment-kernel>
    with T.Kernel(1, threads=1) as _:
        F = T.alloc_fragment((n,), "float32")  # <fragment-tile>
        for i in T.serial(n):
            F[i] = A[i] - 2.0
        for i in T.serial(n):
            B[i] = F[i]


_GPU_ADVICE = ("known only at run time: on GPU targets local, fragment and shared tiles need sizes known at compile "
               "time (registers and shared memory are sized when the kernel is compiled); allocate a constant upper "
               "bound (the largest size the kernel needs) and use part of it; T.dynamic sizes are for the kernel's "
               "global tensors")


@pytest.mark.parametrize("func,op,name,marker,shape", [
    (run_time_local, "T.alloc_local", "L", "local", "(n,)"),
    (run_time_shared, "T.alloc_shared", "S", "shared", "(n,)"),
    (run_time_fragment, "T.alloc_fragment", "F", "fragment", "(n,)"),
])
def test_gpu_tile_of_a_run_time_size_names_the_allocation(func, op, name, marker, shape):
    with pytest.raises(LoweringError) as info:
        lower(func, target="cuda")
    assert str(info.value) == (
        f"{_THIS}:{_line_of(marker + '-kernel')}: lowering kernel '{func.__name__}' for cuda failed: "
        f"{_THIS}:{_line_of(marker + '-tile')}: {op}: the tile '{name}' ({op}({shape}, \"float32\")) has the shape "
        f"{shape}, {_GPU_ADVICE}")


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_cpu_tiles_of_a_run_time_size_still_run(backend, target):
    for func, expect in ((run_time_local, lambda a: (a * 3.0).flip(0)), (run_time_shared, lambda a: a + 1.0),
                         (run_time_fragment, lambda a: a - 2.0)):
        kernel = tilelang.compile(func, target=target, execution_backend=backend)
        for size in (1, 5, 40):
            a = torch.randn(size)
            b = torch.full((size,), float("nan"))
            kernel(a, b)
            torch.testing.assert_close(b, expect(a), rtol=0, atol=0)


@T.prim_func
def folded_extent(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=1) as bx:
        L = T.alloc_local((bx * 0 + 4,), "float32")  # a constant once simplified
        S = T.alloc_shared((n * 0 + 8,), "float32")
        for i in T.serial(4):
            L[i] = A[i] * 2.0
        for i in T.serial(8):
            S[i] = A[i]
        for i in T.serial(4):
            B[i] = L[i] + S[i + 4]


def test_extents_that_simplify_to_constants_are_legal_everywhere():
    assert "L_ptr[i" in lower(folded_extent, target="cuda").device_source
    kernel = tilelang.compile(folded_extent, target="llvm", execution_backend="tvm_ffi")
    a = torch.randn(8)
    b = torch.zeros(8)
    kernel(a, b)
    torch.testing.assert_close(b[:4], a[:4] * 2.0 + a[4:], rtol=0, atol=0)


@T.prim_func
def dynamic_shared(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
    with T.Kernel(1, threads=32) as _:
        S = T.alloc_shared((n,), "float32", "shared.dyn")
        T.copy(A, S)
        T.copy(S, B)


def test_dynamic_shared_memory_keeps_a_run_time_size_on_cuda():
    assert "extern __shared__" in lower(dynamic_shared, target="cuda").device_source


@T.prim_func
def vectorized_nothing(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=1) as bx:
        for i in T.vectorized(bx):  # bx is 0: no iteration
            B[i] = A[i]
        B[3] = A[3] + 1.0


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_vectorized_loop_of_extent_zero_runs_no_iteration(backend, target):
    kernel = tilelang.compile(vectorized_nothing, target=target, execution_backend=backend)
    a = torch.randn(4)
    b = torch.full((4,), -7.0)
    kernel(a, b)
    torch.testing.assert_close(b, torch.tensor([-7.0, -7.0, -7.0, float(a[3]) + 1.0]), rtol=0, atol=0)
    lower(vectorized_nothing, target="cuda")  # no "Failed to vectorize loop with extent 0"


@T.prim_func
def workspace_in_kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        W = T.alloc_global((32,), "float32")  # <workspace in kernel>
        for i in T.Parallel(32):
            W[i] = A[bx * 32 + i] * 2
        for i in T.Parallel(32):
            B[bx * 32 + i] = W[i]


def test_gpu_workspace_inside_the_kernel_is_refused_with_its_line():
    """TVM stopped with "Cannot allocate global memory when targeting CUDA", without the line."""
    with pytest.raises(LoweringError) as info:
        lower(workspace_in_kernel, target="cuda")
    text = str(info.value)
    assert f"{_THIS}:{_line_of('workspace in kernel')}: T.alloc_global: the workspace 'W'" in text
    assert "declare it before 'with T.Kernel(...)'" in text
    assert "Check failed" not in text


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_cpu_workspace_inside_the_kernel_is_one_per_block(backend, target):
    kernel = tilelang.compile(workspace_in_kernel, execution_backend=backend, target=target)
    a = torch.randn(64)
    b = torch.zeros(64)
    kernel(a, b)
    assert torch.equal(b, a * 2)


def test_a_constant_tile_past_32_bit_indices_is_refused_with_its_real_size():
    """``(65536, 65536)`` wrapped to 0 elements when flattened in int32, and the error said the
    tile had "the shape (0,) once simplified, no element"."""

    def define():
        @T.prim_func
        def huge(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                S = T.alloc_shared((65536, 65536), "float32")  # <huge tile>
                S[0, 0] = A[0]
                A[1] = S[0, 0]

    with pytest.raises(LoweringError) as info:
        define()
    assert (f"{_THIS}:{_line_of('huge tile')}: T.alloc_shared: shape (65536, 65536) has 4294967296 elements, more "
            "than the 2147483647 (2**31 - 1) that its 32-bit indices reach") in str(info.value)


def test_a_constant_tile_of_int64_extents_is_indexed_in_64_bits():
    @T.prim_func
    def wide(A: T.Tensor((4,), "int8")):
        with T.Kernel(1, threads=1) as _:
            S = T.alloc_global((T.int64(2), T.int64(2**30 + 1)), "int8")
            S[1, 2**30] = A[0]
            A[1] = S[1, 2**30]

    source = lower(wide, target="c").device_source
    assert "tl_workspace_alloc_int8((int64_t)2147483650)" in source and "[(int64_t)2147483649]" in source
