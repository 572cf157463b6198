"""Loops whose span does not fit their dtype run every iteration Python's ``range`` has.

TVMScript makes a loop's extent ``stop - start`` in the loop variable's dtype: with constant
int32 bounds ``T.serial(-2000000000, 2000000000)`` got the extent -294967296 and ran no iteration,
as did its stepped and negative-step forms (lowering/loop_steps.py counts them in int64 now). A
uint32 loop with a step counted ``(stop - start + step - 1) / step`` in uint32, which wrapped for
``range(0, 4294967295, 2000000000)``: no iteration, or a TVM internal error with constant bounds.
The expected values are Python's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


@T.prim_func
def constant_spans(A: T.Tensor((8,), "int32")):
    with T.Kernel(1) as bx:
        for i in T.serial(-2000000000, 2000000000, 1000000000):
            A[0] = A[0] + 1
            A[1] = i
        for i in T.serial(2000000000, -2000000000, -1000000000):
            A[2] = A[2] + 1
            A[3] = i
        for i in T.serial(-2000000000, 2000000000):
            if i == 1999999999:
                A[4] = 7
        for i in T.serial(5, 3):  # an empty range stays empty
            A[5] = 1


@T.prim_func
def unsigned_steps(A: T.Tensor((8,), "int32"), lo: T.uint32, hi: T.uint32):
    with T.Kernel(1) as bx:
        for i in T.serial(lo, hi, T.uint32(2000000000)):
            A[0] = A[0] + 1
            A[1] = T.cast(i, "int32")
        for j in T.serial(T.uint32(0), T.uint32(4294967295), T.uint32(2000000000)):
            A[2] = A[2] + 1


def _wrapped(value):
    return (value + 2**31) % 2**32 - 2**31


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_constant_int32_bounds_whose_span_passes_int32_run_every_iteration(backend, target):
    A = torch.zeros(8, dtype=torch.int32)
    tilelang.compile(constant_spans, execution_backend=backend, target=target)(A)
    forward, backward = range(-2000000000, 2000000000, 1000000000), range(2000000000, -2000000000, -1000000000)
    assert A.tolist() == [len(forward), forward[-1], len(backward), backward[-1], 7, 0, 0, 0]


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_stepped_uint32_loops_near_the_maximum_count_without_wrapping(backend, target):
    kernel = tilelang.compile(unsigned_steps, execution_backend=backend, target=target)
    for lo, hi in [(0, 4294967295), (5, 3), (4294967290, 4294967295), (0, 4000000001)]:
        A = torch.zeros(8, dtype=torch.int32)
        kernel(A, lo, hi)
        values = range(lo, hi, 2000000000)
        last = _wrapped(values[-1]) if values else 0
        assert A.tolist()[:3] == [len(values), last, 3], (lo, hi)
