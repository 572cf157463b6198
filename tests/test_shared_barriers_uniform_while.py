"""Shared memory written and read back inside a ``while`` loop that is the same for every thread of the block.

``while k < n:`` (``k`` a ``T.alloc_var`` every thread sets from the same values, ``n`` a scalar
parameter), ``while k < 4:`` and ``while sched.valid():`` of ``T.PersistentTileScheduler`` around a
``T.copy`` into shared memory and a read of other threads' elements did not lower for CUDA:
PlanSharedBarriers (lowering/shared_hazards.py) took every ``while`` for per-thread control flow
and stopped with its race error ("... inside the if on the thread index ..."), and it took every
``local`` variable in a condition for a per-thread value (``v = n`` then ``if v > 16:`` stopped at
TVM's "Cannot insert syncs inside condition"). A local buffer whose every store is made by all
threads alike, from block-uniform values (thread_uniform.uniform_local_buffers, now also over the
views StorageRewrite makes of merged ``T.alloc_var`` scalars), is block-uniform too; a ``while``
whose condition is block-uniform and whose body has no ``break``/``continue`` gets its barriers
inside, including the one at the top of the body that keeps the next iteration's copy from
overwriting what slower threads still read. Counters or locals that differ between threads, a
``break`` on the thread index, or memory the kernel writes still get no barrier inside.

A loop a ``break`` may leave (``if k == n: T.loop_break()`` in a serial loop) may end right after
any statement of its body: the code after it was ordered only against the accesses after the
body's last barrier, so a copy into ``S`` before the ``break`` and a read of ``S`` after the loop
had no barrier between them (wrong results on the emulated GPU in about half the launches). Every
access of such a body now stays unordered for the code after the loop and for the next iteration.

Each kernel runs on the emulated GPU (tests/test_tileops_cuda.py: one block = one OpenMP team)
with 32, 64 and 128 threads, 20 times per input, against a torch reference.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402
from cuda_source_blocks import braced as _braced, kernel_body  # noqa: E402

CU = load_private("test_tileops_cuda", "uniform_while_emulator")

LAUNCHES = 20
THREADS = (32, 64, 128)
K = 4  # tiles of A


# -- kernels --------------------------------------------------------------------------------------
# Each copies tile k of A into shared memory inside the loop and reads it back reversed (every
# thread reads another thread's element).


def _counter(N):
    """``while k < n`` with a counter every thread steps alike; ``S`` is filled before the loop
    and read after it (no iteration when ``n <= 0``: a barrier after the loop)."""

    @T.prim_func
    def counter(A: T.Tensor((K * N,), "float32"), O: T.Tensor(((K + 1) * N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            k = T.alloc_var("int32")
            T.fill(S, 2.0)
            k = 0
            while k < n:
                T.copy(A[k * N:(k + 1) * N], S)
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
                k += 1
            for t in T.Parallel(N):
                O[K * N + t] = S[N - 1 - t]

    return counter


def _counter_ref(a, o, n, N):
    s = torch.full((N,), 2.0)
    for k in range(max(0, n)):
        s = a[k * N:(k + 1) * N].clone()
        o[k * N:(k + 1) * N] = s.flip(0)
    o[K * N:] = s.flip(0)


def _constant_bound(N):
    @T.prim_func
    def constant_bound(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            k = T.alloc_var("int32")
            k = 0
            while k < K:
                T.copy(A[k * N:(k + 1) * N], S)
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
                k += 1

    return constant_bound


def _constant_bound_ref(a, o, N):
    for k in range(K):
        o[k * N:(k + 1) * N] = a[k * N:(k + 1) * N].flip(0)


def _persistent(N, workers=3):
    """Persistent workers over a 2 x 2 tile grid (``K`` tiles): the scheduler's state is four
    ``T.alloc_var`` scalars, merged by StorageRewrite into one local buffer with views."""

    @T.prim_func
    def persistent(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32")):
        with T.Kernel(workers, threads=N) as worker:
            S = T.alloc_shared((N,), "float32")
            sched = T.PersistentTileScheduler(2, K // 2, num_workers=workers)
            sched.init(worker)
            while sched.valid():
                T.copy(A[sched.linear_idx * N:(sched.linear_idx + 1) * N], S)
                for t in T.Parallel(N):
                    O[sched.linear_idx * N + t] = S[N - 1 - t]
                sched.next_tile()

    return persistent


def _local_if(N):
    """An ``if`` on a local variable every thread sets to the same parameter."""

    @T.prim_func
    def local_if(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            v = T.alloc_var("int32")
            v = n
            if v > 16:
                T.copy(A, S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]

    return local_if


def _local_if_ref(a, o, n, N):
    if n > 16:
        o[:] = a[:N].flip(0)


def _break_out(N):
    """A serial loop a ``break`` (the same in every thread) may leave right after the copy into
    ``S``: the read of ``S`` after the loop needs a barrier after it, although the last barrier
    inside the loop follows the copy (it was missing: wrong results)."""

    @T.prim_func
    def break_out(A: T.Tensor((K * N,), "float32"), O: T.Tensor(((K + 1) * N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            for k in T.serial(K):
                T.copy(A[k * N:(k + 1) * N], S)
                if k == n:
                    T.loop_break()
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
            for t in T.Parallel(N):
                O[K * N + t] = S[N - 1 - t]

    return break_out


def _break_out_ref(a, o, n, N):
    for k in range(K):
        s = a[k * N:(k + 1) * N]
        if k == n:
            break
        o[k * N:(k + 1) * N] = s.flip(0)
    o[K * N:] = s.flip(0)


# name -> (kernel maker, [(inputs maker, reference)])
CASES = {
    "counter": (_counter, [(lambda a, N, n=n: [a, torch.zeros((K + 1) * N), n],
                            lambda a, o, n, N: _counter_ref(a, o, n, N)) for n in (3, 0, 4, -1)]),
    "constant_bound": (_constant_bound, [(lambda a, N: [a, torch.zeros(K * N)], lambda a, o, N: _constant_bound_ref(a, o, N))]),
    "persistent": (_persistent, [(lambda a, N: [a, torch.zeros(K * N)], lambda a, o, N: _constant_bound_ref(a, o, N))]),
    "break_out": (_break_out, [(lambda a, N, n=n: [a, torch.zeros((K + 1) * N), n],
                                lambda a, o, n, N: _break_out_ref(a, o, n, N)) for n in (0, 1, 2, 7)]),
    "local_if": (_local_if, [(lambda a, N, n=n: [a[:N], torch.zeros(N), n],
                              lambda a, o, n, N: _local_if_ref(a, o, n, N)) for n in (32, 8)]),
}


def _lower(func):
    from tilelang_core.lowering import lower

    return lower(func, target="cuda")


def _loop_body(body: str) -> str:
    """The braced body of the kernel's one ``while`` (printed ``while (1) { if (!(c)) { break; } ... }``)."""
    return _braced(body, body.index("while ("))


# -- lowering -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["counter", "constant_bound", "persistent"])
def test_the_barriers_go_inside_the_block_uniform_while(name):
    """One barrier between the copy and the read, one at the top of the body (the next
    iteration's copy overwrites what the read of this one uses); the condition as written."""
    body = kernel_body(_lower(CASES[name][0](64)).device_source)
    loop = _loop_body(body)
    assert loop.count("__syncthreads()") == 2, body
    copy = loop.index("S_ptr[((int)threadIdx.x)] =")
    assert loop.index("__syncthreads()") < copy < loop.rindex("__syncthreads()") < loop.index("S_ptr[(63 -"), body
    assert "tvm_thread_invariant" not in body, body


def test_the_while_may_run_no_iteration():
    """The fill before the loop and the read after it: a barrier after the loop (the ones inside
    do not run when ``n <= 0``), none before it (fill and copy: each thread its own elements)."""
    body = kernel_body(_lower(_counter(64)).device_source)
    loop = _loop_body(body)
    before, after = body[:body.index(loop)], body[body.index(loop) + len(loop):]
    assert "__syncthreads()" not in before, body
    assert after.lstrip().startswith("__syncthreads();"), body


def test_an_if_on_a_uniform_local_variable_holds_its_barrier():
    body = kernel_body(_lower(_local_if(64)).device_source)
    block = _braced(body, body.index("if (16 < v[0])"))
    assert "__syncthreads()" in block, body


def test_a_loop_a_break_may_leave_is_ordered_against_the_code_after_it():
    body = kernel_body(_lower(_break_out(64)).device_source)
    loop = _braced(body, body.index("for (int k"))
    after = body[body.index(loop) + len(loop):]
    assert after.lstrip().startswith("__syncthreads();"), body


# -- loops and locals that may differ between threads: no barrier inside ------------------------------


def _per_thread_start():
    N = 64

    @T.prim_func
    def per_thread_start(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            k = T.alloc_var("int32")
            k = tx // 32
            while k < n:
                T.copy(A[k * N:(k + 1) * N], S)
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
                k += 1

    return per_thread_start


def _per_thread_step():
    N = 64

    @T.prim_func
    def per_thread_step(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            k = T.alloc_var("int32")
            k = 0
            while k < n:
                T.copy(A[k * N:(k + 1) * N], S)
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
                if tx < 3:
                    k += 1
                k += 1

    return per_thread_step


def _break_on_thread():
    N = 64

    @T.prim_func
    def break_on_thread(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            k = T.alloc_var("int32")
            k = 0
            while k < n:
                T.copy(A[k * N:(k + 1) * N], S)
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
                k += 1
                if tx == k:
                    break

    return break_on_thread


def _written_start():
    N = 64

    @T.prim_func
    def written_start(A: T.Tensor((K * N,), "float32"), O: T.Tensor((K * N,), "float32"), C: T.Tensor((1,), "int32")):
        with T.Kernel(2, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            k = T.alloc_var("int32")
            k = C[0]
            while k < K:
                T.copy(A[k * N:(k + 1) * N], S)
                for t in T.Parallel(N):
                    O[k * N + t] = S[N - 1 - t]
                k += 1
            C[0] = 1

    return written_start


def _local_set_by_one_thread():
    N = 64

    @T.prim_func
    def local_set_by_one_thread(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32"), n: T.int32):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            v = T.alloc_var("int32")
            v = 0
            if tx == 0:
                v = n
            if v > 16:
                T.copy(A, S)
                for t in T.Parallel(N):
                    O[t] = S[N - 1 - t]

    return local_set_by_one_thread


@pytest.mark.parametrize("make", [_per_thread_start, _per_thread_step, _break_on_thread, _written_start,
                                  _local_set_by_one_thread],
                         ids=["start_from_thread_index", "step_under_thread_if", "break_on_thread_index",
                              "start_from_memory_the_kernel_writes", "local_set_by_one_thread"])
def test_a_loop_or_local_that_may_differ_between_threads_gets_no_barrier_inside(make):
    """The threads may leave the loop (or skip the if) apart: no barrier can go inside."""
    with pytest.raises(LoweringError, match="race on its elements|Cannot insert syncs inside condition"):
        _lower(make())


# -- results --------------------------------------------------------------------------------------


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_gpu_matches_torch(name, threads, tmp_path):
    make, runs = CASES[name]
    run = CU._emulated(_lower(make(threads)), tmp_path)
    a = torch.randn(K * threads)
    for inputs, reference in runs:
        args = inputs(a, threads)
        want = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        reference(*want[:2], *want[2:], threads)
        for _ in range(LAUNCHES):
            got = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
            run(*got)
            assert torch.equal(got[1], want[1]), (name, threads, args[2:], int((got[1] != want[1]).sum()))


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_sources_compile_with_nvcc(tmp_path):
    CU.compile_translation_units({n: _lower(make(64)) for n, (make, _) in CASES.items()}, tmp_path)


def test_the_race_error_of_a_per_thread_while_names_the_loop():
    """The error names the while loop and its line, not an if on the thread index (the only such
    if inside is a bounds guard the pipeline made for the copy, on the while's line)."""
    with pytest.raises(LoweringError) as info:
        _lower(_per_thread_start())
    text = str(info.value)
    assert re.search(r"inside the while loop at line \d+, whose condition may differ between threads", text), text
    assert "the if on the thread index" not in text and "cannot go inside that loop" in text
