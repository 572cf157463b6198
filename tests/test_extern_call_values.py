"""A ``T.call_extern`` used inside another operation runs exactly once per evaluation
(lowering/atomic_values.py binds it in front of its statement, as it does an atomic's value).

C printed ``T.min(f(p), f(p))`` as ``((f(p) < f(p)) ? f(p) : f(p))``: three calls where two were
written; ``T.max(f(p), -1)``, ``T.clamp``, ``//`` and ``%`` called ``f`` twice on ``c``, LLVM's
integer ``T.abs`` three times, ``//`` twice, and ``f`` in a store's index twice. The function here counts its calls
in ``C[0]`` and returns the count before; each form checks the count and the values on every
CPU pair (``c``: the function comes with ``T.import_source``; ``llvm``: from a shared library
loaded into the process, where the kernel's undefined symbol finds it). A call in an arm of
``T.if_then_else`` that is not taken still does not run, and a call in another call's arguments
inside ``T.min`` runs once with it (C called both twice), also under a ``T.abs`` there (C called
the inner one twice). A ``T.if_then_else`` holding a call inside ``//``, ``T.max`` or an index
runs its call once (it ran twice, or, in an index, wrote out of bounds).
"""

from __future__ import annotations

import ctypes
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

NAME = "tl_test_counted_call"
ADD_NAME = "tl_test_counted_add"
COUNTER = (f"int {NAME}(int* p) {{ int old = *p; *p = old + 1; return old; }}\n"
           f"int {ADD_NAME}(int* p, int v) {{ int old = *p; *p = old + 1; return old + v; }}\n")
STEPS = 4

#: form -> (the values stored in Out for X = 0, 1, 2, 3, the calls in all)
FORMS = {
    "min_of_two_calls": ([0, 2, 4, 6], 8),
    "max_with_constant": ([0, 1, 2, 3], 4),
    "clamp": ([1, 1, 2, 2], 4),
    "abs": ([2, 1, 0, 1], 4),
    "floordiv": ([-2, -1, -1, 0], 4),
    "floormod": ([1, 0, 1, 0], 4),
    "in_an_index": ([10, 11, 12, 13], 4),
    "untaken_arm": ([5, 5, 0, 1], 2),
    "call_in_a_call_in_min": ([1, 5, 5, 5], 8),
    "call_in_abs_in_a_call": ([2, 4, 8, 12], 8),
    "branch_in_floordiv": ([2, 2, 0, 0], 2),
    "branch_in_max": ([0, 0, 0, 1], 2),
    "branch_in_an_index": ([11, 12, 13, 9], 2),
    "branch_and_call_in_abs": ([0, 1, 2, 4], 6),
}


def counted(C):
    return T.call_extern("int32", NAME, T.access_ptr(C[0], "rw"))


def counted_add(C, v):
    return T.call_extern("int32", ADD_NAME, T.access_ptr(C[0], "rw"), v)


def kernel(form: str, target: str):
    @T.prim_func
    def calls(C: T.Tensor((1,), "int32"), X: T.Tensor((STEPS,), "int32"), Out: T.Tensor((STEPS,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            if target == "c":
                T.import_source(COUNTER.replace("int tl_", "static int tl_"))
            for i in T.serial(STEPS):
                if form == "min_of_two_calls":
                    Out[i] = T.min(counted(C), counted(C))
                elif form == "max_with_constant":
                    Out[i] = T.max(counted(C), -1)
                elif form == "clamp":
                    Out[i] = T.clamp(counted(C), 1, 2)
                elif form == "abs":
                    Out[i] = T.abs(counted(C) - 2)
                elif form == "floordiv":
                    Out[i] = (counted(C) - 3) // (X[i] * 0 + 2)
                elif form == "floormod":
                    Out[i] = (counted(C) - 3) % (X[i] * 0 + 2)
                elif form == "in_an_index":
                    Out[T.min(counted(C), STEPS - 1)] = i + 10
                elif form == "call_in_a_call_in_min":
                    Out[i] = T.min(counted_add(C, counted(C)), 5)
                elif form == "call_in_abs_in_a_call":
                    Out[i] = T.min(counted_add(C, T.abs(counted(C) - 1)), 100)
                elif form == "branch_in_floordiv":
                    Out[i] = T.if_then_else(X[i] > 1, counted(C), 5) // (X[i] * 0 + 2)
                elif form == "branch_in_max":
                    Out[i] = T.max(T.if_then_else(X[i] > 1, counted(C), -1), 0)
                elif form == "branch_and_call_in_abs":
                    Out[i] = T.abs(T.min(T.if_then_else(X[i] > 1, counted(C), 3), counted(C) + 0))
                elif form == "branch_in_an_index":
                    Out[T.min(T.max(T.if_then_else(X[i] > 1, counted(C) + 1, 0), 0), STEPS - 1)] = i + 10
                else:
                    Out[i] = T.if_then_else(X[i] > 1, counted(C), 5)

    return calls


@pytest.fixture(scope="module")
def counter_library(tmp_path_factory):
    """The counting function in a shared library loaded with RTLD_GLOBAL (for target llvm)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("counter")
    (folder / "counter.c").write_text(COUNTER)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(folder / "libcounter.so"), str(folder / "counter.c")],
                   check=True)
    return ctypes.CDLL(str(folder / "libcounter.so"), mode=ctypes.RTLD_GLOBAL)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("backend, target", cpu_pairs())
def test_an_extern_call_inside_an_operation_runs_once(backend, target, form, counter_library):
    k = tilelang.compile(kernel(form, target), target=target, execution_backend=backend)
    c, x = torch.zeros(1, dtype=torch.int32), torch.arange(STEPS, dtype=torch.int32)
    out = torch.full((STEPS,), 9, dtype=torch.int32)
    k(c, x, out)
    values, calls = FORMS[form]
    assert (int(c[0]), out.tolist()) == (calls, values), form


def test_the_c_source_calls_once_per_call_written():
    source = lower(kernel("min_of_two_calls", "c"), target="c").kernel_source
    body = source[source.index("calls_kernel("):]
    assert body.count(f"{NAME}(") == 2, body
