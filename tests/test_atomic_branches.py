"""An atomic in the right operand of ``and``/``or`` or in an arm of a select runs only when that
operand or arm is evaluated, on every target (lowering/atomic_values.py, ``branch_effects``).

LLVM computes both operands of ``and``/``or`` and both arms of ``select`` before combining them, so
on ``llvm`` ``if A[g] < 0 and T.atomic_add(C[0], 1, return_prev=True) >= 0:`` added 1 to ``C[0]``
for every ``g``, not only for the negative elements (10 instead of 3 here), silently; C and CUDA
short-circuit ``&&``, ``||`` and ``?:`` and were right. Found by the operator fuzzer.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "atomic_branches_emulator")

BLOCK = 8


def _kernel(threads=1):
    N = T.dynamic("n")

    @T.prim_func
    def branches(A: T.Tensor((N,), "int32"), C: T.Tensor((5,), "int32"), P: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=threads) as bx:
            for i in T.Parallel(BLOCK):
                g = bx * BLOCK + i
                if g < N:
                    # and: counts the negative elements; or: counts the others
                    if A[g] < 0 and T.atomic_add(C[0], 1, return_prev=True) >= 0:
                        P[g] = 1
                    if A[g] < 0 or T.atomic_add(C[1], 1, return_prev=True) < 0:
                        P[g] = P[g] + 2
                    # select arms: one counter per arm
                    P[g] = P[g] + T.Select(A[g] > 0, T.atomic_add(C[2], 1, return_prev=True) * 0 + 4,
                                           T.atomic_add(C[3], 1, return_prev=True) * 0 + 8)
                    # a boolean value (not a condition) with the atomic right of `and`
                    P[g] = P[g] + T.Cast("int32", A[g] > 0 and T.atomic_add(C[4], 1) >= 0) * 16

    return branches


def _inputs():
    a = torch.tensor([-1, 0, 1, -2, 3, 0, 0, -5, 7, 1, 2, -3, 4], dtype=torch.int32)
    return a, torch.zeros(5, dtype=torch.int32), torch.zeros(a.shape[0], dtype=torch.int32)


def _check(a, c, p):
    neg, pos = int((a < 0).sum()), int((a > 0).sum())
    assert c.tolist() == [neg, a.numel() - neg, pos, a.numel() - pos, pos], c.tolist()
    want = torch.where(a < 0, 3, 0) + torch.where(a > 0, 4 + 16, 8)
    assert torch.equal(p, want.to(torch.int32)), (p.tolist(), want.tolist())


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths_run_the_atomic_only_in_its_branch(path):
    a, c, p = _inputs()
    compile_on(_kernel(), path)(a, c, p)
    _check(a, c, p)


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_compiles_with_nvcc(tmp_path):
    from tilelang_core.lowering import lower

    CU.compile_translation_units({"branches": lower(_kernel(threads=BLOCK), target="cuda")}, tmp_path)


@CU.emulator
def test_emulated_gpu_runs_the_atomic_only_in_its_branch(tmp_path):
    from tilelang_core.lowering import lower

    a, c, p = _inputs()
    CU._emulated(lower(_kernel(threads=BLOCK), target="cuda"), tmp_path)(a, c, p)
    _check(a, c, p)


def _bf16_kernel(form):
    @T.prim_func
    def bf16_branch(A: T.Tensor((10,), "bfloat16"), H: T.Tensor((1,), "bfloat16"), P: T.Tensor((10,), "bfloat16")):
        with T.Kernel(10, threads=1) as bx:
            if form == "if_then_else":
                P[bx] = T.if_then_else(A[bx] > T.bfloat16(0), T.atomic_add(H[0], T.bfloat16(1), return_prev=True), T.bfloat16(-1))
            elif form == "select":
                P[bx] = T.Select(A[bx] > T.bfloat16(0), T.atomic_add(H[0], T.bfloat16(1), return_prev=True), T.bfloat16(-1))
            elif form == "and":
                P[bx] = T.Cast("bfloat16", A[bx] > T.bfloat16(0) and T.atomic_add(H[0], T.bfloat16(1), return_prev=True) >= T.bfloat16(0))
            else:  # the supported spelling: an if statement around the atomic's own statement
                if A[bx] > T.bfloat16(0):
                    P[bx] = T.atomic_add(H[0], T.bfloat16(1), return_prev=True)

    return bf16_branch


@pytest.mark.parametrize("form", ["if_then_else", "select", "and"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_bfloat16_atomic_in_a_branch_runs_only_in_its_branch(path, form):
    """bfloat16 atomics are computed in statements placed before their statement (lowering/atomics.py,
    ``_hoist_bf16``): in a branch it ran every time (``H[0]`` counted all 10 blocks, not the 6
    positive elements), silently, and was then refused. A branch holding an atomic is now stored
    by an ``if`` statement in front of its statement (lowering/atomic_values.py), so the atomic is
    in its own statement inside the branch, as in the ``if`` spelling."""
    a = torch.tensor([1, -1, 2, 0, 3, -4, 5, 1, -1, 1], dtype=torch.bfloat16)
    h, p = torch.zeros(1, dtype=torch.bfloat16), torch.full((10,), -7.0, dtype=torch.bfloat16)
    compile_on(_bf16_kernel(form), path)(a, h, p)
    assert float(h[0]) == 6.0
    if form == "and":
        assert p.tolist() == [1.0 if x > 0 else 0.0 for x in a.tolist()], p
    else:
        assert sorted(p[a > 0].tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and torch.all(p[a <= 0] == -1.0), p


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_bfloat16_atomic_under_an_if_statement_runs_in_its_branch(path):
    a = torch.tensor([1, -1, 2, 0, 3, -4, 5, 1, -1, 1], dtype=torch.bfloat16)
    h, p = torch.zeros(1, dtype=torch.bfloat16), torch.full((10,), -1.0, dtype=torch.bfloat16)
    compile_on(_bf16_kernel("if"), path)(a, h, p)
    assert float(h[0]) == 6.0
    assert sorted(p[a > 0].tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def _bf16_load_store_kernel():
    N = T.dynamic("n")

    @T.prim_func
    def load_store(A: T.Tensor((N,), "bfloat16"), C: T.Tensor((N,), "bfloat16")):
        with T.Kernel(T.ceildiv(N, 8), threads=1) as bx:
            for i in T.Parallel(8):
                g = bx * 8 + i
                if g < N:
                    T.atomic_store(C[g], T.atomic_load(A[g]) + T.bfloat16(1))

    return load_store


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_bfloat16_atomic_load_under_a_bounds_guard_is_not_refused(path):
    """The bounds guard puts ``T.atomic_load(A[g])`` in an arm of ``T.if_then_else``; a load changes
    nothing, so it is not refused as a branch (the refusal above first stopped this kernel)."""
    a = torch.arange(13, dtype=torch.bfloat16)
    c = torch.zeros(13, dtype=torch.bfloat16)
    compile_on(_bf16_load_store_kernel(), path)(a, c)
    assert torch.equal(c, a + 1)
