"""``a, b = pair(x)`` into names that exist (language/tuple_assign.py).

TVMScript refused existing names in the same block ("Variable a already defined in current
scope") and, inside an ``if`` or a loop body, made new names local to it: after the block the
old values were back, a wrong result without a word. ``a, b = A[i]`` stopped with TVM's "Type
ir.PrimType does not support subscript".
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tvm.error import DiagnosticError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id  # noqa: E402


def _pair(x):
    return x + 1.0, x * 2.0


@T.macro
def _macro_pair(x):
    return x + 1.0, x * 2.0


@T.macro
def _swapped(a, b):
    return b, a


@T.prim_func
def _unpacking(A: T.Tensor((4,), "float32"), Z: T.Tensor((4, 4), "float32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            a, b = _pair(A[i])
            if A[i] > 0:
                a, b = _pair(b)  # 2A + 1, 4A for a positive A
            Z[0, i] = a * b
            c, d = _macro_pair(A[i])
            for _ in T.serial(2):
                c, d = _macro_pair(d)
            Z[1, i] = c + d
            e = A[i]
            f = -A[i]
            e, f = _swapped(e, f)  # the same block: evaluated once, then assigned
            Z[2, i] = e
            Z[3, i] = f


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_unpacking_a_call_assigns_existing_names(backend, target):
    kernel = tilelang.compile(_unpacking, target=target, execution_backend=backend)
    a = torch.tensor([1.0, -2.0, 3.0, 0.5])
    z = torch.zeros(4, 4)
    kernel(a, z)
    pa, pb = a + 1, a * 2
    pa, pb = torch.where(a > 0, pb + 1, pa), torch.where(a > 0, pb * 2, pb)
    c, d = a + 1, a * 2
    for _ in range(2):
        c, d = d + 1, d * 2
    torch.testing.assert_close(z, torch.stack([pa * pb, c + d, -a, a]))


@pytest.mark.parametrize("value, message", [
    ("one", r"cannot unpack a float32 expression into 2 names"),
    ("three", r"cannot unpack 3 values into 2 names \(too many values to unpack\)"),
])
def test_unpacking_the_wrong_number_of_values_says_so(value, message):
    with pytest.raises(DiagnosticError, match=message):

        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(4):
                    a = A[i]
                    b = A[i]
                    if value == "one":
                        a, b = A[i]
                    else:
                        a, b = _three(A[i])


def _three(x):
    return x, x, x


N = 8  # a module global named like a target below


def test_unpacking_a_shape_beside_a_module_global_keeps_binding_names():
    """``m, N = A.shape`` binds the names (the global N is not a kernel variable to store into);
    the first version of the call form refused it ("cannot unpack Array")."""

    @T.prim_func
    def shaped(A: T.Tensor((4, 3), "float32"), B: T.Tensor((4, 3), "float32")):
        m, N = A.shape
        with T.Kernel(1, threads=1) as _:
            for i, j in T.grid(m, N):
                B[i, j] = A[i, j] * 2.0

    kernel = tilelang.compile(shaped, target="c", execution_backend="cython")
    a = torch.randn(4, 3)
    b = torch.zeros(4, 3)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)
