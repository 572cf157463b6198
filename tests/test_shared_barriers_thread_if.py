"""Shared memory written and read back inside an ``if`` on the thread index (lowering/shared_hazards.py).

``if tx == 0:`` around two serial passes over a shared buffer (thread 0 fills ``S2``, then scans
it) stopped CUDA lowering at TVM's "Cannot insert syncs inside condition": ThreadSync compared
``S2[i]`` with ``S2[i]`` as two threads' accesses and wanted a ``__syncthreads()`` inside the
``if``, where not every thread of the block would reach it. One thread needs no barrier with
itself; the same holds for ``tx < 1``, nested ``if``\\ s, the ``else`` of ``tx != 0``, and threads
that touch only the elements indexed by their own thread index. Where several threads inside
the ``if`` write and read one element (``if tx < 32:`` and every thread over ``S2[i]``) the
kernel races: a LoweringError names the line, the buffer and the ``if``.

Each kernel runs on the emulated GPU (tests/test_tileops_cuda.py: one block = one OpenMP team)
30 times and must match the same computation compiled for target ``c`` (the ``T.Parallel``
spelling, which CPU targets lower too, or a twin written with it where the kernel uses
``T.get_thread_binding``).
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402
from cuda_source_blocks import if_block as _if_block, kernel_body  # noqa: E402
from source_lines import line_containing  # noqa: E402

CU = load_private("test_tileops_cuda", "thread_if_emulator")

LAUNCHES = 30
N = 64


# -- kernels --------------------------------------------------------------------------------------
# Prefix sum of 2 * A by one thread in shared memory, then every thread copies its element out.


def _scan_parallel():
    """``if t == 0`` inside ``T.Parallel``: the spelling every target lowers (the c reference)."""

    @T.prim_func
    def scan_parallel(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            for t in T.Parallel(N):
                if t == 0:
                    for i in T.serial(N):
                        S2[i] = A[i] * 2.0
                    for i in T.serial(N - 1):
                        S2[i + 1] = S2[i + 1] + S2[i]
            for t in T.Parallel(N):
                O[t] = S2[t]

    return scan_parallel


def _scan_eq0():
    @T.prim_func
    def scan_eq0(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            acc = T.alloc_local((1,), "float32")
            tx = T.get_thread_binding()
            if tx == 0:
                for i in T.serial(N):
                    S2[i] = A[i] * 2.0
                acc[0] = 0.0
                for i in T.serial(N):
                    acc[0] += S2[i]
                    S2[i] = acc[0]
            O[tx] = S2[tx]

    return scan_eq0


def _scan_lt1():
    @T.prim_func
    def scan_lt1(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            if tx < 1:
                for i in T.serial(N):
                    S2[i] = A[i] * 2.0
                for i in T.serial(N - 1):
                    S2[i + 1] = S2[i + 1] + S2[i]
            O[tx] = S2[tx]

    return scan_lt1


def _scan_nested():
    @T.prim_func
    def scan_nested(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            if tx < 8:
                if tx == 0:
                    for i in T.serial(N):
                        S2[i] = A[i] * 2.0
                    for i in T.serial(N - 1):
                        S2[i + 1] = S2[i + 1] + S2[i]
            O[tx] = S2[tx]

    return scan_nested


def _scan_else():
    """The single thread in the ``else`` of ``tx != 0`` (the other threads write ``O`` meanwhile)."""

    @T.prim_func
    def scan_else(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            if tx != 0:
                O[tx] = -1.0
            else:
                for i in T.serial(N):
                    S2[i] = A[i] * 2.0
                for i in T.serial(N - 1):
                    S2[i + 1] = S2[i + 1] + S2[i]
            O[tx] = S2[tx]

    return scan_else


def _chunks_parallel():
    """Four chunks: every thread copies a chunk into ``S``, thread 0 scans it into ``S2`` with a
    carry, every thread copies ``S2`` out; barriers before, after the ``if`` and between the
    iterations (the next chunk's copy overwrites what thread 0 read)."""

    @T.prim_func
    def chunks(A: T.Tensor((4 * N,), "float32"), O: T.Tensor((4 * N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S = T.alloc_shared((N,), "float32")
            S2 = T.alloc_shared((N,), "float32")
            carry = T.alloc_shared((1,), "float32")
            for t in T.Parallel(N):
                if t == 0:
                    carry[0] = 0.0
            for k in T.serial(4):
                T.copy(A[k * N], S)
                for t in T.Parallel(N):
                    if t == 0:
                        for i in T.serial(N):
                            S2[i] = carry[0] + S[i]
                            carry[0] = S2[i]
                        for i in T.serial(N):
                            S2[i] = S2[i] * 0.5
                T.copy(S2, O[k * N])

    return chunks


def _rounds():
    """Thread 0 rewrites ``S2`` in every round, every thread reads it after the ``if``: the
    barrier after the ``if``, and one before it for the next round (the readers of the last
    round must be done before thread 0 overwrites ``S2``; the loop-carried write after read)."""

    @T.prim_func
    def rounds(A: T.Tensor((4 * N,), "float32"), O: T.Tensor((4 * N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            for k in T.serial(4):
                if tx == 0:
                    for i in T.serial(N):
                        S2[i] = A[k * N + i]
                    for i in T.serial(N - 1):
                        S2[i + 1] = S2[i + 1] + S2[i]
                O[k * N + tx] = S2[N - 1 - tx]

    return rounds


def _rounds_parallel():
    @T.prim_func
    def rounds_parallel(A: T.Tensor((4 * N,), "float32"), O: T.Tensor((4 * N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            for k in T.serial(4):
                for t in T.Parallel(N):
                    if t == 0:
                        for i in T.serial(N):
                            S2[i] = A[k * N + i]
                        for i in T.serial(N - 1):
                            S2[i + 1] = S2[i + 1] + S2[i]
                for t in T.Parallel(N):
                    O[k * N + t] = S2[N - 1 - t]

    return rounds_parallel


def _own_elements():
    """``if tx < 32``: each thread writes and reads back only ``S2[tx]`` (no conflict)."""

    @T.prim_func
    def own(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            S2[tx] = 0.0
            if tx < 32:
                S2[tx] = A[tx] * 2.0
                O[tx] = S2[tx] + 1.0
            if tx >= 32:
                O[tx] = S2[tx] + 3.0

    return own


def _own_elements_parallel():
    @T.prim_func
    def own_parallel(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            for t in T.Parallel(N):
                S2[t] = 0.0
                if t < 32:
                    S2[t] = A[t] * 2.0
                    O[t] = S2[t] + 1.0
                if t >= 32:
                    O[t] = S2[t] + 3.0

    return own_parallel


def _writer_in_if():
    """Thread 0 writes ``S2``, every thread reads another thread's element after the ``if``."""

    @T.prim_func
    def writer_in_if(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            if tx == 0:
                for i in T.serial(N):
                    S2[i] = A[i] * 2.0
            O[tx] = S2[N - 1 - tx]

    return writer_in_if


def _writer_in_if_parallel():
    @T.prim_func
    def writer_in_if_parallel(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            for t in T.Parallel(N):
                if t == 0:
                    for i in T.serial(N):
                        S2[i] = A[i] * 2.0
            for t in T.Parallel(N):
                O[t] = S2[N - 1 - t]

    return writer_in_if_parallel


# name -> (CUDA kernel, the kernel compiled for c as the reference, input sizes)
CASES = {
    "scan_parallel": (_scan_parallel, _scan_parallel, (N, N)),
    "scan_eq0": (_scan_eq0, _scan_parallel, (N, N)),
    "scan_lt1": (_scan_lt1, _scan_parallel, (N, N)),
    "scan_nested": (_scan_nested, _scan_parallel, (N, N)),
    "scan_else": (_scan_else, _scan_parallel, (N, N)),
    "chunks": (_chunks_parallel, _chunks_parallel, (4 * N, 4 * N)),
    "rounds": (_rounds, _rounds_parallel, (4 * N, 4 * N)),
    "own_elements": (_own_elements, _own_elements_parallel, (N, N)),
    "writer_in_if": (_writer_in_if, _writer_in_if_parallel, (N, N)),
}


def _lower(func, target="cuda"):
    from tilelang_core.lowering import lower

    return lower(func, target=target)


def _body(art) -> str:
    return kernel_body(art.device_source)


# -- lowering -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowers_for_cuda_without_a_barrier_inside_the_if(name):
    body = _body(_lower(CASES[name][0]()))
    conds = re.findall(r"if \((.*threadIdx\.x.*|tx\[0\].*)\) \{", body)
    assert conds, body
    for cond in conds:
        assert "__syncthreads()" not in _if_block(body, cond), body


def test_the_single_thread_section_is_ordered_against_the_code_around_it():
    """Writer inside the if, readers after it: the barrier goes right after the if."""
    body = _body(_lower(_writer_in_if()))
    after = body[body.index("if (tx[0] == 0)"):]
    after = after[len(_if_block(body, "tx[0] == 0")):]
    assert after.lstrip().startswith("__syncthreads();"), body
    body = _body(_lower(_chunks_parallel()))
    # per chunk: after the copy into S (thread 0 reads all of it; this one also orders the last
    # chunk's reads of S2 before thread 0 rewrites it) and after the if (everyone reads S2, and the
    # next copy overwrites S); thread 0's carry needs none: only thread 0 touches it
    assert body.count("__syncthreads()") == 2, body
    body = _body(_lower(_rounds()))
    loop = body[body.index("for (int k"):]
    assert loop.index("__syncthreads()") < loop.index("if (tx[0] == 0)"), body  # the loop-carried one
    assert loop[loop.index("if (tx[0] == 0)"):].count("__syncthreads()") == 1, body


def test_c_and_llvm_lower_the_same_kernels():
    for make in (_scan_parallel, _chunks_parallel, _rounds_parallel, _own_elements_parallel, _writer_in_if_parallel):
        for target in ("c", "llvm"):
            _lower(make(), target)


# -- a real race inside the if --------------------------------------------------------------------


def test_several_threads_writing_and_reading_one_element_inside_the_if_is_a_clear_error():
    @T.prim_func
    def racy(O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            S2 = T.alloc_shared((N,), "float32")
            acc = T.alloc_local((1,), "float32")
            tx = T.get_thread_binding()
            if tx < 32:
                acc[0] = 0.0
                for i in T.serial(N):
                    S2[i] = T.float32(i)
                for i in T.serial(N):
                    acc[0] += S2[i]
                O[tx] = acc[0]

    with pytest.raises(LoweringError) as info:
        _lower(racy)
    text = str(info.value)
    assert "Cannot insert syncs" not in text, text
    src = pathlib.Path(__file__).read_text().splitlines()
    read = next(k for k, line in enumerate(src, 1) if "acc[0] += S2[i]" in line and k > _line_of("def racy"))
    write = next(k for k, line in enumerate(src, 1) if "S2[i] = T.float32(i)" in line and k > _line_of("def racy"))
    cond = next(k for k, line in enumerate(src, 1) if "if tx < 32:" in line and k > _line_of("def racy"))
    assert f"{__file__}:{read}: shared buffer 'S2' is read here and written at line {write}" in text, text
    assert f"if on the thread index at line {cond}" in text, text
    assert "split the if" in text and "`if tx == 0:`" in text, text


def test_one_column_of_threads_is_still_several_threads():
    """threads=(32, 2): ``if tx == 0`` admits two threads (ty = 0 and 1) racing on ``S2[i]``;
    ``tx == 0 and ty == 0`` is one thread."""

    @T.prim_func
    def column(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=(32, 2)) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            if tx == 0:
                for i in T.serial(N):
                    S2[i] = A[i] * 2.0
                for i in T.serial(N - 1):
                    S2[i + 1] = S2[i + 1] + S2[i]
            O[ty * 32 + tx] = S2[ty * 32 + tx]

    @T.prim_func
    def corner(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=(32, 2)) as bx:
            S2 = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            if tx == 0 and ty == 0:
                for i in T.serial(N):
                    S2[i] = A[i] * 2.0
                for i in T.serial(N - 1):
                    S2[i + 1] = S2[i + 1] + S2[i]
            O[ty * 32 + tx] = S2[ty * 32 + tx]

    with pytest.raises(LoweringError, match=r"shared buffer 'S2' is (read|written) here and (written|read) at line \d+ by different threads"):
        _lower(column)
    body = _body(_lower(corner))
    assert "__syncthreads()" not in _if_block(body, "(tx[0] == 0) && (ty[0] == 0)"), body


def _line_of(text: str) -> int:
    return line_containing(__file__, text)


# -- results --------------------------------------------------------------------------------------


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_gpu_matches_c(name, tmp_path):
    cuda_func, cpu_func, sizes = CASES[name]
    run = CU._emulated(_lower(cuda_func()), tmp_path)
    reference = tilelang.compile(cpu_func(), target="c")
    a = torch.randn(sizes[0])
    want = torch.full((sizes[1],), float("nan"))
    reference(a, want)
    for _ in range(LAUNCHES):
        got = torch.full((sizes[1],), float("nan"))
        run(a, got)
        assert torch.equal(got, want), (name, int((got != want).sum()), got, want)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_sources_compile_with_nvcc(tmp_path):
    CU.compile_translation_units({n: _lower(make[0]()) for n, make in CASES.items()}, tmp_path)
