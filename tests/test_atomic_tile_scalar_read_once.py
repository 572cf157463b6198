"""A tile atomic's scalar value is read once, before any element is updated.

``T.atomic_add(A[0:8, 0:16], A[0, 0])`` re-read ``A[0, 0]`` inside the loop over the tile, after the
first element's update: an all-ones ``A`` became ``[2, 3, 3, ...]`` on ``c`` and ``llvm`` (torch's
``A[0:8, 0:16] += A[0, 0]`` gives all 2), and on CUDA the threads of the block raced for it. A
value with a side effect (``T.atomic_add(C[0], 1.0, return_prev=True)``) ran once per element. The
value now goes into a local before the loop (language/tileops/atomic.py ``_read_once``), followed
on GPU targets by a block barrier where it reads the destination itself.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "atomic_read_once_emulator")

THREADS = 64


def _self_alias(threads: int = THREADS):
    """(Also a case of the GPU kit, scripts/gpu_kit/barrier_cases.py, with 64 and 256 threads.)"""

    @T.prim_func
    def self_alias(A: T.Tensor((8, 16), "float32"), B: T.Tensor((4, 8), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            T.atomic_add(A[0:8, 0:16], A[0, 0])
            T.atomic_xor(B, B[0, 0])

    return self_alias


def _nested_prev():
    @T.prim_func
    def nested_prev(A: T.Tensor((8, 16), "float32"), C: T.Tensor((1,), "float32")):
        with T.Kernel(3, threads=THREADS) as bx:
            T.atomic_add(A[0:8, 0:16], T.atomic_add(C[0], 1.0, return_prev=True))

    return nested_prev


def _self_alias_inputs():
    a = torch.ones(8, 16)
    b = torch.arange(5, 5 + 32, dtype=torch.int32).reshape(4, 8)
    want_a, want_b = a.clone(), b.clone()
    want_a[0:8, 0:16] += want_a[0, 0].clone()
    want_b ^= int(want_b[0, 0])
    return a, b, want_a, want_b


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_self_aliasing_value_is_read_before_the_updates(path):
    a, b, want_a, want_b = _self_alias_inputs()
    compile_on(_self_alias(), path)(a, b)
    assert torch.equal(a, want_a), a  # was [2, 3, 3, ...]
    assert torch.equal(b, want_b), b  # was B[0, 0] ^ B[0, 0] = 0 first, then every other element unchanged


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_value_with_a_side_effect_runs_once_per_block(path):
    a, c = torch.zeros(8, 16), torch.zeros(1)
    compile_on(_nested_prev(), path)(a, c)
    assert float(c[0]) == 3.0, c  # one count per block, was 3 * 128
    # the blocks added 0, 1 and 2 (in some order) to every element
    assert torch.equal(a, torch.full((8, 16), 3.0)), a


def test_cuda_source_reads_the_value_then_syncs_the_block():
    from tilelang_core.lowering import lower

    src = lower(_self_alias(), target="cuda").device_source
    body = src[src.rindex("__global__"):]
    for dst in ("A_ptr", "B_ptr"):
        read = re.search(r"(atomic_value\w*)\[0\] = " + dst + r"\[0\];\n\s*__syncthreads\(\);\n\s*(for|if) \(", body)
        assert read, body
        assert re.search(r"tl_atomic_\w+\(\(&\(" + dst + r"\[.*\)\), " + read.group(1) + r"\[0\]\)", body), body


def test_cuda_source_has_no_barrier_for_a_value_of_other_memory():
    from tilelang_core.lowering import lower

    src = lower(_nested_prev(), target="cuda").device_source
    body = src[src.rindex("__global__"):]
    assert "__syncthreads" not in body, body
    assert re.search(r"atomic_value\w*\[0\] = tl_atomic_add_\w+\(\(&\(C_ptr\[0\]\)\)", body), body


def test_cuda_source_has_no_barrier_where_some_threads_may_not_reach_it():
    """Under ``if tx < 8:`` (and in a loop whose bounds depend on the thread) a barrier would be
    reached by some threads only, which may hang a CUDA block: the value is still read once, but
    no ``__syncthreads()`` is placed there."""
    from tilelang_core.lowering import lower

    @T.prim_func
    def divergent(A: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            if tx < 8:
                T.atomic_add(A[0:8, 0:16], A[0, 0])
            for j in T.serial(tx):
                T.atomic_add(A[0:8, 0:16], A[0, 0])

    src = lower(divergent, target="cuda").device_source
    body = src[src.rindex("__global__"):]
    assert "__syncthreads" not in body, body
    assert len(re.findall(r"atomic_value\w*\[0\] = A_ptr\[0\];", body)) == 2, body


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
def test_emulated_gpu_every_thread_reads_before_any_update(tmp_path):
    from tilelang_core.lowering import lower

    a, b, want_a, want_b = _self_alias_inputs()
    CU._emulated(lower(_self_alias(), target="cuda"), tmp_path)(a, b)
    assert torch.equal(a, want_a), a
    assert torch.equal(b, want_b), b


def _view_alias():
    @T.prim_func
    def view_alias(A: T.Tensor((8, 16), "float32")):
        with T.Kernel(1, threads=THREADS) as bx:
            V = T.view(A, (128,))
            T.atomic_add(A[0:8, 0:16], V[5])

    return view_alias


def test_cuda_source_syncs_after_a_value_read_through_a_view_of_the_destination():
    """``V = T.view(A, ...)`` is another buffer on ``A``'s storage: a value read through it is a read
    of the destination, so the barrier follows it as for ``A[0, 5]`` (there was none: the threads
    raced, and the emulated GPU gave 10.0 for some elements of an ``arange`` ``A`` instead of 5.0)."""
    from tilelang_core.lowering import lower

    src = lower(_view_alias(), target="cuda").device_source
    body = src[src.rindex("__global__"):]
    assert re.search(r"atomic_value\w*\[0\] = A_ptr\w*\[5\];\n\s*__syncthreads\(\);\n\s*for \(", body), body


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_value_read_through_a_view_is_read_once(path):
    a = torch.arange(128, dtype=torch.float32).reshape(8, 16)
    compile_on(_view_alias(), path)(a)
    assert torch.equal(a, torch.arange(128, dtype=torch.float32).reshape(8, 16) + 5.0), a


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
def test_emulated_gpu_value_read_through_a_view_is_read_before_the_updates(tmp_path):
    from tilelang_core.lowering import lower

    a = torch.arange(128, dtype=torch.float32).reshape(8, 16)
    CU._emulated(lower(_view_alias(), target="cuda"), tmp_path)(a)
    assert torch.equal(a, torch.arange(128, dtype=torch.float32).reshape(8, 16) + 5.0), a
