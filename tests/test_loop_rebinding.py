"""``i = i + 1`` on a loop variable in its loop's body rebinds the name, as in Python and TileLang.

TVMScript stopped it with "Variable i already defined in current scope" (language/loop_rebinding.py).
A name bound outside the loop and reassigned in it keeps accumulating across iterations.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


@pytest.mark.parametrize("augmented", [False, True], ids=["assign", "augmented"])
@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
def test_a_loop_variable_rebound_in_the_body_is_the_new_value_after_it(backend, target, augmented):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(7):
                C[i] = A[i]  # before the rebinding: the loop's value
                if augmented:  # a Python value: one branch is parsed
                    i += 1  # TVMScript: "Variable i already defined" (i = i + 1 was mended before)
                else:
                    i = i + 1
                B[i] = A[i] * 2.0

    kernel = tilelang.compile(k, target=target, execution_backend=backend)
    a = torch.arange(8, dtype=torch.float32) + 1
    b, c = torch.zeros(8), torch.zeros(8)
    kernel(a, b, c)
    expected_b = torch.zeros(8)
    expected_b[1:] = a[1:] * 2
    expected_c = torch.zeros(8)
    expected_c[:7] = a[:7]
    torch.testing.assert_close(b, expected_b)
    torch.testing.assert_close(c, expected_c)


def test_a_value_from_outside_the_loop_still_accumulates():
    """Only loop variables are rebound this way; ``x = x + A[i]`` keeps accumulating across
    iterations, as in Python."""

    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            x = A[0]
            for i in T.serial(8):
                x = x + A[i]
            B[0] = x

    a, b = torch.arange(8, dtype=torch.float32) + 1, torch.zeros(1)
    tilelang.compile(k, target="c", execution_backend="cython")(a, b)
    assert b.item() == 1 + sum(range(1, 9))


def test_a_loop_variable_assigned_inside_an_if_warns_that_the_value_ends_with_the_block():
    """Inside an ``if`` (or an inner loop) the assignment binds a variable of that block only: after
    it ``i`` is the loop's value again, where Python keeps the new one; it now warns."""
    from tilelang_core.language.loop_rebinding import LoopRebindingWarning

    with pytest.warns(LoopRebindingWarning, match=r"i is the variable of an enclosing loop; assigned inside an if or "
                                                  r"an inner loop, its new value lasts until the end of that block"):

        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(4):
                    if A[i] > 0:
                        i += 4
                    B[i] = 9.0

    for form in ("tuple", "annotated"):  # the other assignments of a name
        with pytest.warns(LoopRebindingWarning, match=r"i is the variable of an enclosing loop"):
            _rebound_in_an_if(form)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopRebindingWarning)  # the plain rebinding and other names: no warning

        @T.prim_func
        def fine(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(4):
                    x = i
                    if A[i] > 0:
                        x += 4
                    i = i + 4
                    B[i] = A[x]


def _rebound_in_an_if(form):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                if A[i] > 0:
                    match form:
                        case "tuple":
                            i, q = i + 4, 0
                        case "annotated":
                            i: T.int32 = i + 4
                B[i] = 9.0

    return k
