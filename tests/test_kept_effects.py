"""An operation whose value a constant decides keeps an operand with a side effect
(language/kept_effects.py, lowering/kept_effects.py).

TVM 0.27 folded ``x * 0``, ``0 * x``, ``0 // x``, ``x % 1``, ``T.truncmod(x, 1)``,
``tvm.tirx.all(x, False)`` and ``tvm.tirx.any(x, True)`` to a constant when the kernel was defined, and its simplifier folded
``x * 0``, ``x % 1`` and ``x - x`` later: with ``T.atomic_add(C[0], 1, return_prev=True)`` (or
``T.atomic_max``, ``T.atomic_or``) as ``x`` the update never ran, and a ``T.call_extern`` of a C
function that counts its calls was not called. The value may still fold; the call runs exactly
once per evaluation, on every CPU pair and on the emulated GPU.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs, installed  # noqa: E402
from private_modules import load_private  # noqa: E402

BLOCKS = 10


def _add(C):
    return T.atomic_add(C[0], 1, return_prev=True)


#: form -> (the value stored, the counter after BLOCKS blocks)
FORMS = {
    "times_zero": (0, BLOCKS),
    "zero_times": (0, BLOCKS),
    "zero_floordiv": (0, BLOCKS),
    "zero_truncdiv": (0, BLOCKS),
    "floormod_one": (0, BLOCKS),
    "truncmod_one": (0, BLOCKS),
    "int64_times_zero": (0, BLOCKS),
    "float_times_zero": (0, BLOCKS),
    "max_times_zero": (0, 1),
    "or_times_zero": (0, 1),
    "and_false": (0, BLOCKS),
    "or_true": (1, BLOCKS),
}


def counter_kernel(form):
    @T.prim_func
    def count(C: T.Tensor((1,), "int32"), P: T.Tensor((BLOCKS,), "int32")):
        with T.Kernel(BLOCKS, threads=1) as bx:
            if form == "times_zero":
                P[bx] = _add(C) * 0
            elif form == "zero_times":
                P[bx] = 0 * _add(C)
            elif form == "zero_floordiv":
                P[bx] = 0 // (_add(C) + 1)  # the first block's add returns 0: a divisor of 0 raises
            elif form == "zero_truncdiv":
                P[bx] = T.truncdiv(0, _add(C) + 1)
            elif form == "floormod_one":
                P[bx] = _add(C) % 1
            elif form == "truncmod_one":
                P[bx] = T.truncmod(_add(C), 1)
            elif form == "int64_times_zero":
                P[bx] = T.Cast("int32", T.Cast("int64", _add(C)) * T.int64(0))
            elif form == "float_times_zero":
                P[bx] = T.Cast("int32", _add(C) * 0.0)
            elif form == "max_times_zero":
                P[bx] = T.atomic_max(C[0], 1, return_prev=True) * 0
            elif form == "or_times_zero":
                P[bx] = T.atomic_or(C[0], 1, return_prev=True) * 0
            elif form == "and_false":  # tvm.tirx.all / any fold (T.And, T.Or and `and`, `or` build the node)
                P[bx] = T.Cast("int32", tirx.all(_add(C) >= 0, False))
            else:
                P[bx] = T.Cast("int32", tirx.any(_add(C) >= 0, True))

    return count


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_folding_constant_keeps_the_atomic(backend, target, form):
    kernel = tilelang.compile(counter_kernel(form), target=target, execution_backend=backend)
    c, p = torch.zeros(1, dtype=torch.int32), torch.full((BLOCKS,), -7, dtype=torch.int32)
    kernel(c, p)
    value, counter = FORMS[form]
    assert int(c[0]) == counter, (form, backend, target, int(c[0]))
    assert p.tolist() == [value] * BLOCKS, (form, p.tolist())


def test_the_kernel_as_defined_keeps_the_atomic():
    """The fold happened when TVM built the expression: the defined kernel had no atomic left."""
    for form in FORMS:
        assert "tl.atomic" in str(counter_kernel(form).body), form


def test_operations_without_a_side_effect_still_fold():
    @T.prim_func
    def plain(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                Y[i] = X[i] * 0 + X[i] % 1 + 0 // X[i] + T.truncmod(X[i], 1)

    assert "Y[i] = 0" in str(plain.body).replace("Y[i] = T.int32(0)", "Y[i] = 0"), plain.body


BUMP = "static int bump(int* p) { int old = *p; *p = old + 1; return old; }\n"

#: form -> (the value stored per iteration, bump calls per iteration)
CALL_FORMS = {
    "times_zero": (0, 1),
    "floormod_one": (0, 1),
    "minus_itself": (-1, 2),  # bump() - bump(): two calls, the second returns one more
    "times_zero_of_difference": (0, 1),
}


def call_kernel(form):
    @T.prim_func
    def calls(C: T.Tensor((1,), "int32"), X: T.Tensor((4,), "int32"), Out: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            T.import_source(BUMP)
            for i in T.serial(4):
                if form == "times_zero":
                    Out[i] = T.call_extern("int32", "bump", T.access_ptr(C[0], "rw")) * 0
                elif form == "floormod_one":
                    Out[i] = T.call_extern("int32", "bump", T.access_ptr(C[0], "rw")) % 1
                elif form == "minus_itself":
                    Out[i] = T.call_extern("int32", "bump", T.access_ptr(C[0], "rw")) - T.call_extern(
                        "int32", "bump", T.access_ptr(C[0], "rw"))
                else:  # the zero appears only once the simplifier has folded X[i] - X[i]
                    Out[i] = T.call_extern("int32", "bump", T.access_ptr(C[0], "rw")) * (X[i] - X[i])

    return calls


@pytest.mark.parametrize("form", list(CALL_FORMS))
@pytest.mark.parametrize("backend", ["cython", "tvm_ffi"])
def test_the_simplifier_keeps_a_call_with_a_side_effect(backend, form):
    if not installed(backend):
        pytest.skip(f"{backend} is not installed")
    kernel = tilelang.compile(call_kernel(form), target="c", execution_backend=backend)
    c, x, out = torch.zeros(1, dtype=torch.int32), torch.arange(4, dtype=torch.int32), torch.full((4,), 9, dtype=torch.int32)
    kernel(c, x, out)
    value, calls = CALL_FORMS[form]
    assert int(c[0]) == 4 * calls, (form, int(c[0]))
    # C leaves the order of the two calls of ``minus_itself`` open: -1 or 1
    assert all(v == value or (form == "minus_itself" and v == 1) for v in out.tolist()), (form, out.tolist())


def test_the_barriers_are_gone_before_code_generation():
    body = lower(call_kernel("times_zero"), target="c").kernel_source.split("calls_kernel(", 2)[-1]
    assert "bump(" in body and "uint32_t" not in body and "reinterpret" not in body, body


CU = load_private("test_tileops_cuda", "kept_effects_emulator")


THREADS = 4


def _cuda_kernel():
    @T.prim_func
    def folded(C: T.Tensor((4,), "int32"), P: T.Tensor((BLOCKS * THREADS, 4), "int32")):
        with T.Kernel(BLOCKS, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            g = bx * THREADS + tx
            P[g, 0] = T.atomic_add(C[0], 1, return_prev=True) * 0
            P[g, 1] = T.atomic_add(C[1], 1, return_prev=True) % 1
            P[g, 2] = 0 // T.atomic_add(C[2], 1, return_prev=True)
            P[g, 3] = T.atomic_max(C[3], bx, return_prev=True) * 0

    return folded


def test_cuda_source_keeps_the_atomics(tmp_path):
    art = lower(_cuda_kernel(), target="cuda -arch=sm_80")
    body = art.device_source[art.device_source.rindex("__global__"):]
    assert len(re.findall(r"tl_atomic_\w+\(", body)) == 4, body
    if CU.NVCC is None:
        pytest.skip("nvcc is not installed")
    CU.compile_translation_units({"folded": art}, tmp_path)


@CU.emulator
def test_emulated_gpu_runs_each_atomic_once(tmp_path):
    c, p = torch.zeros(4, dtype=torch.int32), torch.full((BLOCKS * THREADS, 4), -7, dtype=torch.int32)
    CU._emulated(lower(_cuda_kernel(), target="cuda"), tmp_path)(c, p)
    n = BLOCKS * THREADS
    assert c.tolist() == [n, n, n, BLOCKS - 1], c.tolist()
    assert bool((p == 0).all()), p.tolist()
