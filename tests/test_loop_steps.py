"""Loops with a step other than 1 run as Python's ``range`` does, on every target and loop kind.

TVM 0.27's passes dropped the step of unrolled and vectorized loops (``T.unroll(0, 7, 2)`` ran
``i = 0 .. 6``), a negative step ran no iteration (``for (i = 10; i < 0; i += -3)``), a negative
step known at run time could loop forever, ``T.serial(0, 9, 3)`` was refused (TVMScript takes the
step by keyword only), and a parallel loop not starting at 0 stopped ``llvm`` with a TVM check.
Each loop sums its index into its own slot; the sums are compared with Python's ``range``.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge

RANGES = [(0, 7, 2), (1, 10, 3), (10, 0, -3), (0, 7, 2), (10, 0, -3), (0, 9, 3), (8, 16, 1), (5, 5, 2)]


@T.prim_func
def constant_steps(P: T.Tensor((8,), "int32"), V: T.Tensor((8,), "int32")):
    with T.Kernel(1, threads=1):
        for i in T.unroll(0, 7, 2):
            P[0] = P[0] + i
        for i in T.Unroll(1, 10, 3, explicit=True):
            P[1] = P[1] + i
        for i in T.Serial(10, 0, -3):
            P[2] = P[2] + i
        for i in range(0, 7, 2):
            P[3] = P[3] + i
        for i in T.serial(10, 0, step=-3):
            P[4] = P[4] + i
        for i in T.serial(0, 9, 3):  # TileLang's positional step
            P[5] = P[5] + i
        for i in T.parallel(8, 16):  # a parallel loop not starting at 0
            V[i - 8] = i
        for i in T.unroll(5, 5, 2):  # empty
            P[7] = P[7] + 1
        for i in T.vectorized(0, 8, step=2):
            V[i] = V[i] + 100


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_constant_steps_run_like_range(path):
    kernel = compile_on(constant_steps, path)
    P, V = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32)
    kernel(P, V)
    want = [sum(range(*r)) for r in RANGES]
    want[6] = 0  # slot 6 is not summed
    assert P.tolist() == want
    assert V.tolist() == [i + 8 + (100 if i % 2 == 0 else 0) for i in range(8)]


@T.prim_func
def runtime_step(Q: T.Tensor((2,), "int32"), lo: T.int32, hi: T.int32, st: T.int32):
    with T.Kernel(1, threads=1):
        count = T.alloc_var("int32", 0)
        total = T.alloc_var("int32", 0)
        for i in T.Serial(lo, hi, st):
            count = count + 1
            total = total + i
            if count > 1000:  # a loop that would not end stops here, and the test fails
                T.loop_break()
        Q[0] = count
        Q[1] = total


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_run_time_steps_of_either_sign(path):
    kernel = compile_on(runtime_step, path)
    for lo, hi, st in [(1, 9, -2), (9, 1, -2), (0, 10, 3), (10, 0, -3), (0, 10, 1), (-5, 5, 4), (3, 3, 1), (0, 5, 0)]:
        Q = torch.zeros(2, dtype=torch.int32)
        kernel(Q, lo, hi, st)
        values = range(lo, hi, st) if st else range(0)  # a run-time step of 0: no iteration
        assert Q.tolist() == [len(values), sum(values)], (lo, hi, st)


def test_a_constant_step_of_zero_is_refused():
    @T.prim_func
    def zero_step(P: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(0, 4, step=0):
                P[0] = i

    with pytest.raises(LoweringError, match=r"the loop over 'i' has step 0; a step must not be 0"):
        lower(zero_step, target="c")


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(tmp_path):
    arts = {"constant": lower(constant_steps, target="cuda"), "runtime": lower(runtime_step, target="cuda")}
    source = arts["constant"].device_source
    unrolled = {slot: [int(v) for v in re.findall(rf"P_ptr\[{slot}\] = \(P_ptr\[{slot}\] \+ (\d+)\);", source)]
                for slot in (0, 1)}
    assert unrolled == {0: [2, 4, 6], 1: [1, 4, 7]}, source  # i = 0 adds nothing
    CU.compile_translation_units(arts, tmp_path)


def _empty_ranges():
    @T.prim_func
    def empty_ranges(Y: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.unroll(6, 5):
                Y[0] = Y[0] + i + 1
            for i in T.unroll(0, -3, 1):
                Y[1] = Y[1] + i + 1
            for i in T.vectorized(3, 1):
                Y[2] = Y[2] + i + 1
            for i in T.serial(4, 2):
                Y[3] = Y[3] + i + 1
            for i in T.vectorized(3, 3):
                Y[3] = Y[3] + i + 1
            Y[0] = Y[0] + 1

    return empty_ranges


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_loops_whose_start_is_past_their_stop_run_no_iteration(path):
    """Found by a fuzz pass: ``T.unroll(6, 5)`` stopped with TVM's "Cannot unroll non-constant
    loop" (a negative extent) instead of running no iteration, as ``range(6, 5)`` does, and an empty
    ``T.vectorized`` loop stopped CUDA lowering ("Failed to vectorize loop with extent 0")."""
    y = torch.full((4,), 7, dtype=torch.int32)
    compile_on(_empty_ranges(), path)(y)
    assert y.tolist() == [8, 7, 7, 7]
    lower(_empty_ranges(), target="cuda")  # no error on GPU targets either
