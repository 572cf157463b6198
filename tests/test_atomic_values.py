"""An atomic's previous value used inside another operation runs the atomic exactly once
(lowering/atomic_values.py, and ``T.abs`` in language/tileops/intrinsics.py).

``T.max``, ``T.clamp``, ``T.abs``, ``//`` and ``%`` (of floats too: language/float_modulo.py) and
``T.round(x, "ties-away-from-zero")`` repeat their operand in the code they become:
ten blocks each adding 1 with ``return_prev=True`` ended at 20, 30 or 40 on the CPU targets. Here
each form runs on every CPU pair, and the counter and the previous values are checked exactly; an
atomic in an arm that does not run must not run.
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
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "atomic_values_emulator")

BLOCKS = 10
#: form -> the stored value as a function of the previous counter value p
FORMS = {
    "max": lambda p: max(p, -1),
    "min": lambda p: min(p, 100),
    "clamp": lambda p: min(max(p, -5), 1000),
    "abs": lambda p: p,
    "floordiv": lambda p: p // 3,
    "floormod": lambda p: p % 3,
    "float_clamp": lambda p: p,
    "bfloat16_max": lambda p: p,
    "bfloat16_clamp": lambda p: p,
    # float // and %, T.round away from zero: expressions that repeat their operand (4 to 12 atomics)
    "float_floordiv": lambda p: p // 2,
    "float_floormod": lambda p: p % 3,
    "float_round": lambda p: p,
    "bfloat16_floordiv": lambda p: p // 2,
    "bfloat16_floormod": lambda p: p % 3,
}


def counter_kernel(form):
    @T.prim_func
    def count(C: T.Tensor((1,), "int32"), F: T.Tensor((1,), "float32"), H: T.Tensor((1,), "bfloat16"),
              P: T.Tensor((BLOCKS,), "int32")):
        with T.Kernel(BLOCKS, threads=1) as bx:
            if form == "max":
                P[bx] = T.max(T.atomic_add(C[0], 1, return_prev=True), -1)
            elif form == "min":
                P[bx] = T.min(T.atomic_add(C[0], 1, return_prev=True), 100)
            elif form == "clamp":
                P[bx] = T.clamp(T.atomic_add(C[0], 1, return_prev=True), -5, 1000)
            elif form == "abs":
                P[bx] = T.abs(T.atomic_add(C[0], 1, return_prev=True))
            elif form == "floordiv":
                P[bx] = T.atomic_add(C[0], 1, return_prev=True) // 3
            elif form == "floormod":
                P[bx] = T.atomic_add(C[0], 1, return_prev=True) % 3
            elif form == "float_clamp":
                P[bx] = T.Cast("int32", T.clamp(T.atomic_add(F[0], T.float32(1), return_prev=True), -5.0, 1000.0))
            elif form == "float_floordiv":
                P[bx] = T.Cast("int32", T.atomic_add(F[0], T.float32(1), return_prev=True) // T.float32(2))
            elif form == "float_floormod":
                P[bx] = T.Cast("int32", T.atomic_add(F[0], T.float32(1), return_prev=True) % T.float32(3))
            elif form == "float_round":
                P[bx] = T.Cast("int32", T.round(T.atomic_add(F[0], T.float32(1), return_prev=True), "ties-away-from-zero"))
            elif form == "bfloat16_floordiv":
                P[bx] = T.Cast("int32", T.floordiv(T.atomic_add(H[0], T.bfloat16(1), return_prev=True), T.bfloat16(2)))
            elif form == "bfloat16_floormod":
                P[bx] = T.Cast("int32", T.atomic_add(H[0], T.bfloat16(1), return_prev=True) % T.bfloat16(3))
            elif form == "bfloat16_max":
                P[bx] = T.Cast("int32", T.max(T.atomic_add(H[0], T.bfloat16(1), return_prev=True), T.bfloat16(-1)))
            else:
                P[bx] = T.Cast("int32", T.clamp(T.atomic_add(H[0], T.bfloat16(1), return_prev=True), -5.0, 1000.0))

    return count


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_an_atomic_inside_an_operation_runs_once(backend, target, form):
    if backend == "ctypes":
        pytest.skip("the retired ctypes backend declares no bfloat16 (a parameter of this kernel)")
    kernel = tilelang.compile(counter_kernel(form), target=target, execution_backend=backend)
    c, f, h = torch.zeros(1, dtype=torch.int32), torch.zeros(1), torch.zeros(1, dtype=torch.bfloat16)
    p = torch.full((BLOCKS,), -7, dtype=torch.int32)
    kernel(c, f, h, p)
    counter = int(f[0]) if form.startswith("float_") else int(h[0]) if form.startswith("bfloat16") else int(c[0])
    assert counter == BLOCKS, (form, backend, target, counter)
    assert sorted(p.tolist()) == sorted(FORMS[form](q) for q in range(BLOCKS)), (form, p.tolist())


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_an_atomic_in_an_arm_that_does_not_run_does_not_run(backend, target):
    @T.prim_func
    def guarded(C: T.Tensor((1,), "int32"), D: T.Tensor((1,), "int32"), P: T.Tensor((BLOCKS,), "int32")):
        with T.Kernel(BLOCKS, threads=1) as bx:
            P[bx] = T.if_then_else(bx < 4, T.atomic_add(C[0], 1, return_prev=True) + 100,
                                   T.atomic_add(D[0], 1, return_prev=True) * 2)

    c, d, p = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), torch.zeros(BLOCKS, dtype=torch.int32)
    tilelang.compile(guarded, target=target, execution_backend=backend)(c, d, p)
    assert (int(c[0]), int(d[0])) == (4, BLOCKS - 4), (backend, target)
    assert sorted(p[:4].tolist()) == [100, 101, 102, 103] and sorted(p[4:].tolist()) == [0, 2, 4, 6, 8, 10]


def _float_forms_kernel():
    """The float forms of the CPU test with 32 threads per block (one lane updates): ``//``, ``%``
    and ``T.round(x, "ties-away-from-zero")``, each on its own counter."""

    @T.prim_func
    def float_forms(F: T.Tensor((3,), "float32"), P: T.Tensor((BLOCKS, 3), "int32")):
        with T.Kernel(BLOCKS, threads=32) as bx:
            for i in T.Parallel(32):
                if i == 0:
                    P[bx, 0] = T.Cast("int32", T.atomic_add(F[0], T.float32(1), return_prev=True) // T.float32(2))
                    P[bx, 1] = T.Cast("int32", T.atomic_add(F[1], T.float32(1), return_prev=True) % T.float32(3))
                    P[bx, 2] = T.Cast("int32", T.round(T.atomic_add(F[2], T.float32(1), return_prev=True), "ties-away-from-zero"))

    return float_forms


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_float_forms_cuda_source_compiles_with_nvcc(tmp_path):
    from tilelang_core.lowering import lower

    art = lower(_float_forms_kernel(), target="cuda")
    assert art.device_source.count("tl_atomic_add_f32") == 3 + 1, art.device_source  # 3 calls + the helper
    CU.compile_translation_units({"float_forms": art}, tmp_path)


@CU.emulator
def test_float_forms_run_once_on_the_emulated_gpu(tmp_path):
    from tilelang_core.lowering import lower

    f, p = torch.zeros(3), torch.full((BLOCKS, 3), -7, dtype=torch.int32)
    CU._emulated(lower(_float_forms_kernel(), target="cuda"), tmp_path)(f, p)
    assert f.tolist() == [BLOCKS] * 3, f.tolist()
    for k, fn in enumerate((lambda q: q // 2, lambda q: q % 3, lambda q: q)):
        assert sorted(p[:, k].tolist()) == sorted(fn(q) for q in range(BLOCKS)), (k, p[:, k].tolist())
