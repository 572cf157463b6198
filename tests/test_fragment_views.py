"""``T.reshape``/``T.view`` of a fragment (``T.alloc_fragment``) on CUDA and on the CPU paths.

On CUDA the view, a ``DeclBuffer`` on the fragment's storage, kept pointing at the fragment after
the fragment layout pass (lowering/fragments.py) had replaced its allocation by registers or a
shared tile, and lowering stopped with TVM's "Buffer A_local is used before its definition". The
layout puts the element at storage offset ``f`` in thread ``f % threads``, slot ``f // threads``,
so a view with the fragment's dtype keeps every element where it is: its accesses are proven
owned (register slots) like the fragment's own, or the fragment goes to shared memory with its
views declared again there. A view with another dtype always goes through shared memory.

The kernels are the fragment cases of upstream TileLang's reshape tests (reshape to 1-D and copy
out, a reduction over a reshaped fragment, a 3-D reshape declared before the fragment is filled)
plus a view with another dtype and a transposing view with explicit strides. Each runs on the
emulated GPU (tests/test_tileops_cuda.py: one block = one OpenMP team) and on the CPU paths,
against torch; the CUDA sources compile with nvcc.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "fragment_views_emulator")

LAUNCHES = 10
TORCH = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64, "int16": torch.int16}


def _reshape_to_1d(N, M, dtype):
    """A ``(N // M, M)`` fragment reshaped to ``(N,)`` and copied out through shared memory."""

    @T.prim_func
    def reshape_1d(A: T.Tensor((N // M, M), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32) as _:
            A_shared = T.alloc_shared((N // M, M), dtype)
            A_local = T.alloc_fragment((N // M, M), dtype)
            B_shared = T.alloc_shared((N,), dtype)
            T.copy(A, A_shared)
            T.copy(A_shared, A_local)
            A_flat = T.reshape(A_local, [N])
            T.copy(A_flat, B_shared)
            T.copy(B_shared, B)

    def inputs():
        return torch.randn(N // M, M).to(TORCH[dtype]), torch.zeros(N, dtype=TORCH[dtype])

    return reshape_1d, inputs, lambda A, B: A.reshape(N)


def _reduce_after_reshape(N, M, dtype):
    """A ``(N,)`` fragment seen as ``(N // M, M)`` and reduced along its rows."""

    @T.prim_func
    def reduce_rows(A: T.Tensor((N,), dtype), B: T.Tensor((N // M,), dtype)):
        with T.Kernel(1, threads=32) as _:
            A_shared = T.alloc_shared((N,), dtype)
            A_local = T.alloc_fragment((N,), dtype)
            B_local = T.alloc_fragment((N // M,), dtype)
            T.copy(A, A_shared)
            T.copy(A_shared, A_local)
            A_rows = T.reshape(A_local, [N // M, M])
            T.reduce_max(A_rows, B_local, dim=1)
            T.copy(B_local, B)

    def inputs():
        return torch.randn(N).to(TORCH[dtype]), torch.zeros(N // M, dtype=TORCH[dtype])

    return reduce_rows, inputs, lambda A, B: A.reshape(N // M, M).max(dim=1).values


def _absmax_3d():
    """``(2, 384)`` int64 reshaped to ``(2, 3, 128)`` before it is filled, reduced over the last axis."""
    M, N, groups, per_group = 2, 384, 3, 128

    @T.prim_func
    def absmax_3d(A: T.Tensor((M, N), "int64"), B: T.Tensor((M, groups), "int64")):
        with T.Kernel(1, threads=128) as _:
            A_local = T.alloc_fragment((M, N), "int64")
            A_groups = T.reshape(A_local, [M, groups, per_group])
            B_local = T.alloc_fragment((M, groups), "int64")
            T.copy(A, A_local)
            T.reduce_absmax(A_groups, B_local, dim=2)
            T.copy(B_local, B)

    def inputs():
        return torch.randint(-100, 100, (M, N), dtype=torch.int64), torch.zeros(M, groups, dtype=torch.int64)

    return absmax_3d, inputs, lambda A, B: A.abs().reshape(M, groups, per_group).max(dim=2).values


def _view_other_dtype():
    """A float32 fragment read as int16 halves (bits reinterpreted across elements)."""

    @T.prim_func
    def view_bits(A: T.Tensor((64,), "float32"), B: T.Tensor((128,), "int16")):
        with T.Kernel(1, threads=32) as _:
            F = T.alloc_fragment((64,), "float32")
            T.copy(A, F)
            V = T.view(F, (128,), "int16")
            T.copy(V, B)

    def inputs():
        return torch.randn(64), torch.zeros(128, dtype=torch.int16)

    return view_bits, inputs, lambda A, B: A.view(torch.int16)


def _transposing_view():
    """``T.view`` with explicit strides: a ``(16, 8)`` fragment read as its ``(8, 16)`` transpose."""

    @T.prim_func
    def view_strided(A: T.Tensor((16, 8), "float32"), B: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=32) as _:
            F = T.alloc_fragment((16, 8), "float32")
            T.copy(A, F)
            V = T.view(F, (8, 16), strides=(1, 8))
            T.copy(V, B)

    def inputs():
        return torch.randn(16, 8), torch.zeros(8, 16)

    return view_strided, inputs, lambda A, B: A.T


CASES = {
    "reshape_1d_f32": lambda: _reshape_to_1d(1024, 32, "float32"),
    "reshape_1d_f16": lambda: _reshape_to_1d(2048, 64, "float16"),
    "reduce_after_reshape_f32": lambda: _reduce_after_reshape(1024, 32, "float32"),
    "reduce_after_reshape_f16": lambda: _reduce_after_reshape(2048, 64, "float16"),
    "absmax_3d_int64": _absmax_3d,
    "view_other_dtype": _view_other_dtype,
    "transposing_view": _transposing_view,
}


def _device_body(art) -> str:
    return art.device_source[art.device_source.rindex('extern "C" __global__'):]


def _check(name, run):
    func, inputs, want = CASES[name]()
    args = inputs()
    run(func, args)
    expected = want(*args)
    assert torch.equal(args[-1], expected), (name, int((args[-1] != expected).sum()), args[-1], expected)


def test_same_dtype_reshape_keeps_the_fragment_in_registers():
    """32x32 float32 over 32 threads: 32 registers per thread, read through the 1-D view."""
    from tilelang_core.lowering import lower

    body = _device_body(lower(CASES["reshape_1d_f32"]()[0], target="cuda"))
    assert re.search(r"\bfloat A_local_ptr\[32\];", body), body
    assert not re.search(r"__shared__ .*A_local", body), body
    assert "A_flat" not in body, body  # its accesses are the fragment's register slots


def test_reduced_or_reinterpreted_views_place_the_fragment_in_shared_memory():
    from tilelang_core.lowering import lower

    for name, frag in (("reduce_after_reshape_f32", "A_local"), ("view_other_dtype", "F"), ("transposing_view", "F")):
        body = _device_body(lower(CASES[name]()[0], target="cuda"))
        # a shared tile (TVM may give its storage to another shared tile of the kernel), no registers
        assert not re.search(rf"^\s*(alignas\(\d+\) )?\w+ {frag}_ptr\[", body, re.M), (name, body)
        assert "__shared__" in body, (name, body)


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_gpu_matches_torch(name, tmp_path):
    from tilelang_core.lowering import lower

    func = CASES[name]()[0]
    emulated = CU._emulated(lower(func, target="cuda"), tmp_path)
    for _ in range(LAUNCHES):
        _check(name, lambda f, args: emulated(*args))


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_paths_match_torch(name, path):
    _check(name, lambda f, args: compile_on(f, path)(*args))


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_sources_compile_with_nvcc(tmp_path):
    from tilelang_core.lowering import lower

    CU.compile_translation_units({n: lower(make()[0], target="cuda") for n, make in CASES.items()}, tmp_path)
