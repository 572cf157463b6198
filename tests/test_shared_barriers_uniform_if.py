"""Shared memory written and read back inside an ``if`` that is the same for every thread of the block.

``if bx == 0:``, ``if n > 16:`` (a scalar parameter), ``if M >= 64:`` (a dynamic size), ``if k <
K - 1:`` (a serial or ``T.Pipelined`` loop variable) or ``if Mask[bx] > 0:`` (global memory the
kernel only reads) around a ``T.copy`` into shared memory and a read of other threads' elements
stopped CUDA lowering at TVM's "Cannot insert syncs inside condition": ThreadSync places no
barrier inside an ``if`` unless its condition is marked ``T.tvm_thread_invariant``. Every thread
of the block takes the same branch of such an ``if``, so PlanSharedBarriers
(lowering/shared_hazards.py) now proves the condition block-uniform, places the barrier inside it
and marks it for ThreadSync; the printed condition is the one written. A condition that may differ
between threads (the thread index, a local variable, memory the kernel writes) still gets no
barrier inside.

Each kernel runs on the emulated GPU (tests/test_tileops_cuda.py: one block = one OpenMP team)
30 times and must match the same computation compiled for target ``c`` (the kernel itself, or a
``T.Parallel`` twin where it uses ``T.get_thread_binding``).
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402
from cuda_source_blocks import braced as _braced, if_block as _if_block, kernel_body  # noqa: E402

CU = load_private("test_tileops_cuda", "uniform_if_emulator")

LAUNCHES = 30
N = 64
K = 4


# -- kernels --------------------------------------------------------------------------------------
# Each copies a tile into shared memory inside the if and reads it back reversed (every thread reads
# another thread's element: a barrier between the copy and the read, inside the if).


def _block_index():
    """``if bx == 0`` with an ``else``; the shared tile is filled before the if and read after it
    (the block that skips a branch must still see the fill: barriers before and after the if)."""

    @T.prim_func
    def block_index(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), O: T.Tensor((4 * N,), "float32")):
        with T.Kernel(2, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            T.fill(S, 1.0)
            if bx == 0:
                T.copy(A, S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]
            else:
                T.copy(B[0:N // 2], S[0:N // 2])
                for t in T.Parallel(N):
                    O[N + t] = S[N - 1 - t]
            for t in T.Parallel(N):
                O[2 * N + bx * N + t] = S[N - 1 - t] + 1.0

    return block_index


def _scalar_param():
    @T.prim_func
    def scalar_param(A: T.Tensor((N,), "float32"), O: T.Tensor((2 * N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            T.fill(S, 2.0)
            if n > 16:
                T.copy(A, S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]
            for t in T.Parallel(N):
                O[N + t] = S[N - 1 - t]

    return scalar_param


def _dynamic_size():
    M = T.dynamic("M")

    @T.prim_func
    def dynamic_size(A: T.Tensor((M,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            if M >= N:
                T.copy(A[0:N], S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]

    return dynamic_size


def _serial_loop():
    """``if k < K - 1`` in a serial loop: the next iteration's copy overwrites what this one read
    (a barrier at the top of the loop body too)."""

    @T.prim_func
    def serial_loop(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            for k in T.serial(K):
                if k < K - 1:
                    T.copy(A[k * N:(k + 1) * N], S)
                    for t in T.Parallel(N):
                        O[k * N + t] = S[N - 1 - t]

    return serial_loop


def _pipelined():
    @T.prim_func
    def pipelined(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            for k in T.Pipelined(K, num_stages=2):
                if k < K - 1:
                    T.copy(A[k * N:(k + 1) * N], S)
                    for t in T.Parallel(N):
                        O[k * N + t] = S[N - 1 - t]

    return pipelined


def _block_mask():
    """Block-sparse style: a block works only where a mask it never writes says so."""

    @T.prim_func
    def block_mask(A: T.Tensor((4 * N,), "float32"), Mask: T.Tensor((4,), "int32"), O: T.Tensor((4 * N,), "float32")):
        with T.Kernel(4, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            if Mask[bx] > 0:
                T.copy(A[bx * N:(bx + 1) * N], S)
                for t in T.Parallel(N):
                    O[bx * N + t] = S[N - 1 - t]

    return block_mask


def _nested():
    """A uniform ``if`` inside another: the barrier goes inside the inner one; the fill before
    and the reads after the outer one are ordered by barriers around it (the inner branch may
    not run). The one before the outer ``if`` is not needed (fill and copy: each thread its own
    elements) but kept: the summary of the outer branch counts the inner barrier as none."""

    @T.prim_func
    def nested(A: T.Tensor((N,), "float32"), O: T.Tensor((3 * N,), "float32"), n: T.int32):
        with T.Kernel(2, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            T.fill(S, 3.0)
            if bx == 0:
                if n > 4:
                    T.copy(A, S)
                    for t in T.Parallel(N):
                        O[t] = S[N - 1 - t]
            for t in T.Parallel(N):
                O[N + bx * N + t] = S[N - 1 - t]

    return nested


def _thread_if_inside():
    """An ``if`` on the thread index inside the uniform one: the barrier goes between the copy
    and that inner ``if``, inside the uniform one."""

    @T.prim_func
    def thread_if_inside(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            if n > 16:
                T.copy(A, S)
                if tx < 32:
                    O[tx] = S[N - 1 - tx]

    return thread_if_inside


def _thread_if_inside_parallel():
    @T.prim_func
    def thread_if_inside_parallel(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            if n > 16:
                T.copy(A, S)
                for t in T.Parallel(N):
                    if t < 32:
                        O[t] = S[N - 1 - t]

    return thread_if_inside_parallel


def _inputs(name):
    """Fresh inputs of a case: tensors (outputs filled with zeros) and scalars."""
    a = torch.randn(4 * N)
    if name == "block_index":
        return [[a[:N], a[N:2 * N], torch.zeros(4 * N)]]
    if name == "scalar_param":
        return [[a[:N], torch.zeros(2 * N), n] for n in (32, 8)]
    if name == "dynamic_size":
        return [[a[:m], torch.zeros(N)] for m in (N, N // 2)]
    if name in ("serial_loop", "pipelined"):
        return [[a, torch.zeros(K * N)]]
    if name == "nested":
        return [[a[:N], torch.zeros(3 * N), n] for n in (8, 2)]
    if name == "block_mask":
        return [[a, torch.tensor([1, 0, 0, 1], dtype=torch.int32), torch.zeros(4 * N)]]
    return [[a[:N], torch.zeros(N), n] for n in (32, 8)]  # thread_if_inside


# name -> (CUDA kernel, the kernel compiled for c as the reference, the uniform condition as printed)
CASES = {
    "block_index": (_block_index, _block_index, "((int)blockIdx.x) == 0"),
    "scalar_param": (_scalar_param, _scalar_param, "16 < n"),
    "dynamic_size": (_dynamic_size, _dynamic_size, "64 <= M"),
    "serial_loop": (_serial_loop, _serial_loop, "k < 3"),
    "pipelined": (_pipelined, _pipelined, "k < 3"),
    "block_mask": (_block_mask, _block_mask, "0 < Mask_ptr[((int)blockIdx.x)]"),
    "nested": (_nested, _nested, "4 < n"),
    "thread_if_inside": (_thread_if_inside, _thread_if_inside_parallel, "16 < n"),
}


def _lower(func, target="cuda"):
    from tilelang_core.lowering import lower

    return lower(func, target=target)


def _body(art) -> str:
    return kernel_body(art.device_source)


# -- lowering -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_barrier_goes_inside_the_block_uniform_if(name):
    make, _, cond = CASES[name]
    body = _body(_lower(make()))
    block = _if_block(body, cond)
    assert "__syncthreads()" in block, body
    assert "tvm_thread_invariant" not in body and f"if (({cond}))" not in body, body  # printed as written


def test_the_uniform_if_is_ordered_against_the_code_around_it():
    """Without an ``else`` the branch may not run: the fill before the if and the read after it
    need a barrier after the if (the one inside does not run then). With both branches holding a
    barrier, every path passes one: none is needed before or after the if."""
    body = _body(_lower(_scalar_param()))
    cond = "16 < n"
    block = _if_block(body, cond)
    before, after = body[:body.index(block)], body[body.index(block) + len(block):]
    assert "__syncthreads()" not in before, body  # the fill and the copy: each thread its own elements
    assert after.lstrip().startswith("__syncthreads();"), body
    body = _body(_lower(_block_index()))
    cond = "((int)blockIdx.x) == 0"
    block = _if_block(body, cond)
    before, after = body[:body.index(block)], body[body.index(block) + len(block):]
    assert after.lstrip().startswith("else"), body
    else_block = _braced(after, 0)
    assert "__syncthreads()" in else_block, body
    assert "__syncthreads()" not in before + after[len(else_block):], body
    loop = _body(_lower(_serial_loop()))
    loop = loop[loop.index("for (int k"):]
    assert loop.index("__syncthreads()") < loop.index("if (k < 3)"), loop  # the next copy overwrites S


# -- conditions that may differ between threads: no barrier inside ------------------------------------


def _local_condition():
    @T.prim_func
    def local_condition(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            v = T.alloc_var("int32")
            v = n + tx // 32
            if v > 16:
                T.copy(A, S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]

    return local_condition


def _written_condition():
    @T.prim_func
    def written_condition(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            if O[0] > 0.0:
                T.copy(A, S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]

    return written_condition


@pytest.mark.parametrize("make", [_local_condition, _written_condition], ids=["local_variable", "memory_the_kernel_writes"])
def test_a_condition_that_may_differ_between_threads_gets_no_barrier_inside(make):
    """A local variable set from the thread index is per thread (one every thread sets to the same
    value is not: tests/test_shared_barriers_uniform_while.py); another block may write ``O[0]``
    while this one reads it."""
    with pytest.raises(LoweringError, match="Cannot insert syncs inside condition"):
        _lower(make())


# -- results --------------------------------------------------------------------------------------


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_gpu_matches_c(name, tmp_path):
    cuda_func, cpu_func, _ = CASES[name]
    run = CU._emulated(_lower(cuda_func()), tmp_path)
    _lower(cpu_func(), "llvm")  # CPU targets lower the kernel too
    reference = tilelang.compile(cpu_func(), target="c")
    for args in _inputs(name):
        want = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        reference(*want)
        for _ in range(LAUNCHES):
            got = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
            run(*got)
            for g, w in zip(got, want):
                if isinstance(g, torch.Tensor):
                    assert torch.equal(g, w), (name, int((g != w).sum()), g, w)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_sources_compile_with_nvcc(tmp_path):
    CU.compile_translation_units({n: _lower(make[0]()) for n, make in CASES.items()}, tmp_path)
