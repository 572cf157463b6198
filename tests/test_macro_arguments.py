"""``@T.macro`` arguments bound as Python binds them (language/macro_arguments.py), and a
macro's local names (language/core.py ``_macro_body_names``).

TVMScript pasted each argument's expression wherever the body named the parameter: an atomic
argument ran twice or never, a parameter assigned in a loop or an ``if`` lost its new value after
it, a caller's scalar passed to a macro that assigned its parameter was changed in the caller,
and a load of a buffer the macro wrote first read the new value. A macro assigning a local named
like a global of its module (``y``, ``tmp``) stopped with "Variable y already defined".
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id  # noqa: E402

y = torch.zeros(4)  # a script's global named like the macro's local below
tmp = 1.0


@T.macro
def _twice(B, i, v):
    B[i] = v + v


@T.macro
def _ignores(B, i, v):
    B[i] = 7


@T.prim_func
def _atomic_arguments(C: T.Tensor((2,), "int32"), B: T.Tensor((4,), "int32"), D: T.Tensor((4,), "int32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            _twice(B, i, T.atomic_add(C[0], 1, return_prev=True))
            _ignores(D, i, T.atomic_add(C[1], 1, return_prev=True))


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_an_argument_with_a_side_effect_runs_once(backend, target):
    kernel = tilelang.compile(_atomic_arguments, target=target, execution_backend=backend)
    c = torch.zeros(2, dtype=torch.int32)
    b = torch.zeros(4, dtype=torch.int32)
    d = torch.zeros(4, dtype=torch.int32)
    kernel(c, b, d)
    assert c.tolist() == [4, 4]  # was [8, 0]
    assert b.tolist() == [0, 2, 4, 6]
    assert d.tolist() == [7] * 4


@T.macro
def _times8(x):
    for _ in T.serial(3):
        x = x * 2.0
    return x


@T.macro
def _halved_if_big(x):
    if x > 2.0:
        x = x / 2
    return x


@T.macro
def _bump(x):
    x = x + 1.0
    return x


@T.macro
def _swap(a, b):
    a, b = b, a


@T.macro
def _accumulate(s, v):
    s = s + v


@T.macro
def _clear_then_read(A, i, x):
    A[i] = 0.0
    return x


@T.macro
def _with_locals(v):
    y = v * 2.0
    tmp = y + 1.0
    return tmp


@T.prim_func
def _assigned_parameters(A: T.Tensor((4,), "float32"), Z: T.Tensor((6, 4), "float32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            Z[0, i] = _times8(A[i])
            Z[1, i] = _halved_if_big(A[i])
            x = A[i] * 10.0
            z = _bump(x)
            Z[2, i] = x + z  # the caller's x is unchanged
            a = A[i]
            b = -A[i]
            _swap(a, b)
            Z[3, i] = a  # unchanged: the macro swapped its own copies
            s = T.alloc_var("float32", init=0.0)
            _accumulate(s, A[i])
            _accumulate(s, A[i])
            Z[4, i] = s  # a T.alloc_var is shared, as in TileLang
            Z[5, i] = _clear_then_read(A, i, A[i])  # the value passed, read before the clear


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_assigned_parameters_are_the_macros_own(backend, target):
    kernel = tilelang.compile(_assigned_parameters, target=target, execution_backend=backend)
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    z = torch.zeros(6, 4)
    kernel(a.clone(), z)
    want = torch.stack([a * 8, torch.where(a > 2, a / 2, a), a * 10 + a * 10 + 1, a, 2 * a, a])
    torch.testing.assert_close(z, want)


def test_a_macro_local_named_like_a_module_global():
    """The macro's ``y = ...`` and ``tmp = ...`` make local names, as in Python; the module's
    globals ``y`` and ``tmp`` were bound in its name table first."""

    @T.prim_func
    def locals_kernel(A: T.Tensor((4,), "float32"), Z: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(4):
                Z[i] = _with_locals(A[i])

    kernel = tilelang.compile(locals_kernel, target="c", execution_backend="cython")
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    z = torch.zeros(4)
    kernel(a, z)
    torch.testing.assert_close(z, 2 * a + 1)


@T.macro
def _recurse(B, depth):
    if depth > 0:
        B[0] = B[0] + 1.0
        _recurse(B, depth - 1)


def test_a_macro_recursing_past_pythons_limit_says_how_to_go_deeper():
    """It stopped with the parser's bare "maximum recursion depth exceeded" some 24 levels deep."""
    import sys

    from tilelang_core.errors import KernelDefinitionError

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(600)
    try:
        with pytest.raises(KernelDefinitionError, match=r"macro '_recurse' .* reached Python's recursion limit \(600\) "
                                                        r"\d+ levels deep: .*sys.setrecursionlimit\(4000\)"):

            @T.prim_func
            def deep(B: T.Tensor((1,), "float32")):
                with T.Kernel(1, threads=1) as _:
                    _recurse(B, 40)
    finally:
        sys.setrecursionlimit(limit)


_script_tensor = torch.zeros(4)  # a script's tensor a macro forgot to take as a parameter


@T.macro
def _stores_into_script_tensor(i, v):
    _script_tensor[i] = v


@T.macro
def _loads_script_tensor(i):
    return _script_tensor[i]


def test_a_script_tensor_indexed_in_kernel_code_says_to_pass_it():
    """TVM said "Expected `ir.Var` but got `ffi.Tensor`" (a store), torch "object of type 'Var'
    has no len()" (a load)."""
    from tvm.error import DiagnosticError

    message = r"_script_tensor is a torch.Tensor of the Python program \(shape \(4,\), torch.float32\), not a buffer"
    with pytest.raises(DiagnosticError, match=message):

        @T.prim_func
        def stores(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(4):
                    _stores_into_script_tensor(i, A[i])

    with pytest.raises(DiagnosticError, match=message):

        @T.prim_func
        def loads(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(4):
                    A[i] = _loads_script_tensor(i)


def test_a_macro_called_outside_kernel_code_says_where_to_call_it():
    from tilelang_core.errors import KernelDefinitionError

    with pytest.raises(KernelDefinitionError, match=r"macro '_bump' was called outside kernel code"):
        _bump(1.0)


@T.macro
def _first_n_times3(A, C, n):
    n = n * 2
    n -= 1
    for t in T.serial(n + 1):
        C[t] = A[t] * 3.0


def test_a_number_parameter_rebound_at_the_top_of_a_macro():
    """``n = n * 2`` of a parameter given a Python number: rebound when the kernel is parsed, as in
    Python (TVMScript: "Variable n already defined in current scope")."""

    @T.prim_func
    def first(A: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1) as _:
            _first_n_times3(A, C, 3)

    kernel = tilelang.compile(first, target="c", execution_backend="cython")
    a, c = torch.randn(8), torch.zeros(8)
    kernel(a, c)
    torch.testing.assert_close(c[:6], a[:6] * 3)
    assert torch.equal(c[6:], torch.zeros(2))
