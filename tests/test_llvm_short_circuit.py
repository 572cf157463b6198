"""A guard ``if D[i] != 0 and X[i] // D[i] > 1:`` (or ``D[i] == 0 or ...``) divides only where the
guard lets it, on every CPU path (lowering/llvm_short_circuit.py).

TVM 0.27's LLVM code generator computes both operands of ``and``/``or``; on ``llvm`` the division
ran for ``D[i] = 0`` too and the process stopped with SIGFPE (target ``c`` short-circuits ``&&`` and
``||``). Each kernel call runs in a child process, so that the crash is a test failure rather than
the end of the test run. Found by the operator fuzzer.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import run_in_child  # noqa: E402

FORMS = ("and_floordiv", "or_floormod", "and_truncdiv", "nested", "int64")


def _kernel(form):
    N = T.dynamic("n")
    dtype = "int64" if form == "int64" else "int32"

    @T.prim_func
    def guarded(X: T.Tensor((N,), dtype), D: T.Tensor((N,), dtype), O: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, 4), threads=1) as bx:
            for j in T.Parallel(4):
                i = bx * 4 + j
                if i < N:
                    O[i] = 0
                    if form in ("and_floordiv", "int64"):
                        if D[i] != 0 and X[i] // D[i] > 1:
                            O[i] = 1
                    elif form == "or_floormod":
                        if D[i] == 0 or X[i] % D[i] == 1:
                            O[i] = 1
                    elif form == "and_truncdiv":
                        O[i] = T.Cast("int32", D[i] != 0 and T.truncdiv(X[i], D[i]) > 1)
                    else:
                        if i >= 0 and (D[i] != 0 and (X[i] // D[i] > 1 or X[i] % D[i] == 0)):
                            O[i] = 1

    return guarded


def _want(form, x, d):
    out = []
    for a, b in zip(x.tolist(), d.tolist()):
        if form in ("and_floordiv", "int64"):
            out.append(int(b != 0 and a // b > 1))
        elif form == "or_floormod":
            out.append(int(b == 0 or a % b == 1))
        elif form == "and_truncdiv":
            out.append(int(b != 0 and int(a / b) > 1))
        else:
            out.append(int(b != 0 and (a // b > 1 or a % b == 0)))
    return out


def run_in_this_process(backend: str, target: str) -> dict:
    """Every form's kernel on ``(backend, target)``: ``{form: [output, expected]}`` (the child's job)."""
    results = {}
    for form in FORMS:
        x = torch.tensor([5, 6, 7, -9, 0, 12, 3, 8, -4], dtype=torch.int64 if form == "int64" else torch.int32)
        d = torch.tensor([2, 0, 1, 2, 0, -5, 0, 3, 0], dtype=x.dtype)
        o = torch.full((x.numel(),), -1, dtype=torch.int32)
        compile_on(_kernel(form), (backend, target))(x, d, o)
        results[form] = [o.tolist(), _want(form, x, d)]
    return results


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_the_guarded_division_runs_only_where_the_guard_allows(path):
    results = run_in_child("test_llvm_short_circuit", "run_in_this_process", *path)
    for form, (got, want) in results.items():
        assert got == want, (form, path, got, want)


def test_select_arms_and_other_right_operands_keep_their_form():
    """Only a right operand that may trap becomes a branch (``may_trap``)."""
    from tvm import tirx

    from tilelang_core.lowering.llvm_short_circuit import may_trap

    x, d = tirx.Var("x", "int32"), tirx.Var("d", "int32")
    assert may_trap(tirx.FloorDiv(x, d)) and may_trap(tirx.Mod(x, d) > 1)
    assert not may_trap(tirx.FloorDiv(x, tirx.const(4, "int32"))) and not may_trap(x + d > 1)
    f = tirx.Var("f", "float32")
    assert not may_trap(tirx.Div(f, f))
