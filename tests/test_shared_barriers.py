"""Block barriers TVM's ``ThreadSync`` misses on CUDA (lowering/shared_hazards.py).

* Write after write: ``T.fill(S, a)`` then a ``T.fill``/``T.copy`` into part of ``S``: the two
  ``T.Parallel`` nests give an element to different threads, and without a ``__syncthreads()``
  between them the first fill may land last (found by the tile-operator fuzzer).
* A ``T.view`` of a shared tile with another element size: ``ThreadSync`` compared ``S[t]`` and
  ``V[t]`` as one element of each thread, and put no barrier between the writes into ``S`` and the
  reads through ``V`` (23 of 64 elements wrong on the emulated GPU).
* A write inside an ``if`` on the thread index against a write before or after the ``if``: a
  barrier the pass needed inside the ``if`` (where none can go) was counted as placed, so the
  write after it looked ordered, and no barrier went before/after the ``if`` (30 and 29 of 30
  launches wrong on the emulated GPU).

Each kernel runs on the emulated GPU (tests/test_tileops_cuda.py: one block = one OpenMP team)
against torch, several launches (the race shows up in some of them only), and its CUDA source is
checked for the barrier between the two accesses; the sources compile with nvcc.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "shared_barriers_emulator")

LAUNCHES = 30


def _fill_then_fill_region():
    @T.prim_func
    def fill_region(O: T.Tensor((32, 3), "float32")):
        with T.Kernel(2, threads=32) as bx:
            S = T.alloc_shared((16, 3), "float32")
            T.fill(S, 1)
            T.fill(S[0:16, 2:3], 2)
            T.copy(S, O[bx * 16, 0])

    def want(O):
        w = torch.ones(32, 3)
        w[:, 2] = 2
        return w

    return fill_region, (lambda: (torch.zeros(32, 3),)), want


def _fill_then_copy_region():
    @T.prim_func
    def copy_region(A: T.Tensor((64, 2), "float32"), O: T.Tensor((64, 8), "float32")):
        with T.Kernel(2, threads=64) as bx:
            S = T.alloc_shared((32, 8), "float32")
            T.fill(S, -1)
            T.copy(A[bx * 32, 0], S[0:32, 5:7])
            T.copy(S, O[bx * 32, 0])

    def want(A, O):
        w = torch.full((64, 8), -1.0)
        w[:, 5:7] = A
        return w

    return copy_region, (lambda: (torch.randn(64, 2), torch.zeros(64, 8))), want


def _view_of_shared():
    @T.prim_func
    def view_shared(A: T.Tensor((1, 32), "int64"), O: T.Tensor((1, 64), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((32,), "int64")
            T.copy(A[bx, 0], S)
            V = T.view(S, (64,), "float32")
            T.copy(V, O[bx, 0])

    def inputs():
        bits = torch.randn(64).view(torch.int64).reshape(1, 32)
        return bits, torch.zeros(1, 64)

    def want(A, O):
        return A.view(torch.float32).reshape(1, 64)

    return view_shared, inputs, want


def _single_thread_section(writes_s_first: bool):
    """Thread 0 alone writes ``S`` inside ``if tx == 0`` (besides two serial passes over ``S2``,
    which this pass counts as a hazard it cannot order there); the other threads fill ``S``
    before (``writes_s_first=False``) or after the ``if``. The barrier goes before / after the
    ``if``: the missed one inside it used to count as placed, and hid this write after write."""

    @T.prim_func
    def single_thread(O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            S2 = T.alloc_shared((64,), "float32")
            tx = T.get_thread_binding()
            if not writes_s_first:
                T.fill(S, 1)
            if tx == 0:
                if writes_s_first:
                    for i in T.serial(64):
                        S[i] = 2.0
                for i in T.serial(64):
                    S2[i] = 0.0
                for i in T.serial(64):
                    S2[i] = 1.0
                if not writes_s_first:
                    for i in T.serial(64):
                        S[i] = 2.0
            if writes_s_first:
                T.fill(S, 1)
            T.copy(S, O)

    return single_thread, (lambda: (torch.zeros(64),)), (lambda O: torch.full((64,), 1.0 if writes_s_first else 2.0))


CASES = {"fill_region": _fill_then_fill_region, "copy_region": _fill_then_copy_region, "view_shared": _view_of_shared,
         "fill_then_if": lambda: _single_thread_section(False), "if_then_fill": lambda: _single_thread_section(True)}


def _body(func):
    from tilelang_core.lowering import lower

    art = lower(func, target="cuda")
    return art, art.device_source[art.device_source.rindex('extern "C" __global__'):]


def _between(body: str, first: str, second: str) -> str:
    """The source between the last line matching ``first`` and the next line matching ``second``."""
    lines = body.splitlines()
    i = max(k for k, line in enumerate(lines) if re.search(first, line))
    j = next(k for k in range(i + 1, len(lines)) if re.search(second, lines[k]))
    return "\n".join(lines[i + 1:j])


def test_fill_then_region_fill_has_a_barrier_between():
    _, body = _body(_fill_then_fill_region()[0])
    assert "__syncthreads()" in _between(body, r"S_ptr\[.*\] = 0x1p\+0f", r"S_ptr\[.*\] = 0x1p\+1f"), body


def test_fill_then_region_copy_has_a_barrier_between():
    _, body = _body(_fill_then_copy_region()[0])
    assert "__syncthreads()" in _between(body, r"S_ptr\[.*\] = -0x1p\+0f", r"S_ptr\[.*\] = A_ptr"), body


def test_view_reads_come_after_a_barrier():
    _, body = _body(_view_of_shared()[0])
    assert "__syncthreads()" in _between(body, r"S_ptr\[.*\] = A_ptr", r"\(\(float\*\)S_ptr\)"), body


def test_a_write_inside_a_thread_dependent_if_is_ordered_from_outside():
    _, body = _body(CASES["fill_then_if"]()[0])
    assert "__syncthreads()" in _between(body, r"S_ptr\[.*\] = 0x1p\+0f", r"if \("), body
    _, body = _body(CASES["if_then_fill"]()[0])
    assert "__syncthreads()" in _between(body, r"S2_ptr\[.*\] = 0x1p\+0f", r"S_ptr\[.*\] = 0x1p\+0f"), body


def test_one_thread_per_element_gets_no_extra_barrier():
    """Two stores of one element by the thread that owns it (same index, every thread axis):
    no barrier between them, as ThreadSync does for a read after a write."""

    @T.prim_func
    def own(O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                S[i] = 1.0
                S[i] = S[i] + 2.0
            T.copy(S, O[0])

    _, body = _body(own)
    assert "__syncthreads()" not in body, body  # the copy-out reads each element in its owner too


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_emulated_gpu_matches_torch(name, tmp_path):
    func, inputs, want = CASES[name]()
    art, _ = _body(func)
    run = CU._emulated(art, tmp_path)
    for _ in range(LAUNCHES):
        args = inputs()
        run(*args)
        got, expected = args[-1], want(*args)
        assert torch.equal(got, expected), (name, int((got != expected).sum()), got, expected)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_sources_compile_with_nvcc(tmp_path):
    from tilelang_core.lowering import lower

    CU.compile_translation_units({n: lower(make()[0], target="cuda") for n, make in CASES.items()}, tmp_path)
