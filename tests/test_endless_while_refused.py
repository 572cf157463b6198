"""``while True:`` without a break of its own is refused at its line, as TileLang refuses a
constant-true ``while`` (language/while_loops.py); TVMScript built ``while (1) {`` and the kernel
hung its caller. A loop that breaks out keeps working."""

from __future__ import annotations

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T


def test_a_while_that_never_ends_is_refused_at_its_line():
    with pytest.raises(tvm.error.DiagnosticError, match="this while loop never ends") as caught:

        @T.prim_func
        def k(out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=1) as bx:
                while True:
                    out[0] = out[0] + 1

    assert "test_endless_while_refused.py" in str(caught.value)


def test_a_break_of_an_inner_loop_does_not_end_the_while():
    with pytest.raises(tvm.error.DiagnosticError, match="this while loop never ends"):

        @T.prim_func
        def k(out: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1) as bx:
                while 1:
                    for j in T.serial(4):
                        if out[j] > 0:
                            break
                        out[j] = 1


def test_a_condition_of_constants_only_is_known_true_too():
    """``T.int32(3) > 2`` is not folded when it is built; it is decided as ``assert`` decides its
    condition (python_conditions.constant_truth), and the loop is refused as ``while True:`` is."""
    with pytest.raises(tvm.error.DiagnosticError, match="this while loop never ends"):

        @T.prim_func
        def k(out: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=1) as bx:
                while T.int32(3) > 2:
                    out[0] = out[0] + 1


def test_a_while_true_that_breaks_out_runs():
    @T.prim_func
    def k(out: T.Tensor((4,), "int32"), more: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            i = T.alloc_var("int32", init=0)
            while True:
                out[i] = i * 10
                i += 1
                if i >= 4:
                    break
            j = T.alloc_var("int32", init=0)
            while 1:
                more[j] = j + 1
                j += 1
                if j >= 4:
                    T.loop_break()

    out, more = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    tilelang.compile(k, target="c")(out, more)
    assert out.tolist() == [0, 10, 20, 30] and more.tolist() == [1, 2, 3, 4]
