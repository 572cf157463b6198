"""Stack arrays of C kernels are declared 64-byte aligned (``TL_STACK_ALIGN``,
lowering/codegen.py).

A reversed ``T.cumsum`` over dim 0 of an int8 tile into an int64 tile (GPU-style fragments, run on a
CPU) crashed with SIGSEGV on target ``c`` (cython and tvm_ffi): GCC 12 with ``-march=native``
(AVX-512) assumed a larger alignment for the ``int64_t d_ptr[6]`` stack array to vectorize the
``#pragma omp simd`` loops, placed it in the red zone below an unaligned stack pointer, and read
it with an aligned vector load. Found by the operator fuzzer. Each kernel call runs in a child
process, so that a crash is a test failure rather than the end of the test run; on compilers or
CPUs without the fault the kernel runs either way, and the source check below still holds.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import run_in_child  # noqa: E402

CASES = (("int8", "int64", 1), ("uint8", "int64", 32), ("int8", "int64", 32), ("int32", "int64", 1))


def _kernel(src_dtype, dst_dtype, threads):
    @T.prim_func
    def reversed_scan(A: T.Tensor((3, 3, 2), src_dtype), O: T.Tensor((3, 3, 2), dst_dtype)):
        with T.Kernel(3, threads=threads) as bx:
            s = T.alloc_fragment((3, 2), src_dtype)
            d = T.alloc_fragment((3, 2), dst_dtype)
            T.copy(A[bx, 0, 0], s)
            T.cumsum(s, d, -2, True)
            T.copy(d, O[bx, 0, 0])

    return reversed_scan


def run_in_this_process(backend: str, target: str) -> list:
    """Every case on ``(backend, target)``: ``[[output, expected], ...]`` (the child's job)."""
    out = []
    for src_dtype, dst_dtype, threads in CASES:
        a = torch.arange(18).reshape(3, 3, 2).remainder(7).to(getattr(torch, src_dtype))
        o = torch.zeros(3, 3, 2, dtype=getattr(torch, dst_dtype))
        compile_on(_kernel(src_dtype, dst_dtype, threads), (backend, target))(a, o)
        out.append([o.tolist(), a.to(torch.int64).flip(1).cumsum(1).flip(1).tolist()])
    return out


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_reversed_scan_into_a_wider_tile_runs(path):
    for case, (got, want) in zip(CASES, run_in_child("test_c_stack_array_alignment", "run_in_this_process", *path)):
        assert got == want, (case, path, got, want)


def test_c_source_declares_the_stack_arrays_aligned():
    from tilelang_core.lowering import lower

    src = lower(_kernel("int8", "int64", 1), target="c").device_source
    assert "#define TL_STACK_ALIGN __attribute__((aligned(64)))" in src
    assert "int8_t s_ptr[6] TL_STACK_ALIGN;" in src and "int64_t d_ptr[6] TL_STACK_ALIGN;" in src, src
