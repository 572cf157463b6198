"""``tilelang.transform.LegalizeNegativeIndex``, ``IfStmtBinding`` and ``MergeIfStmt`` on real TIR,
checked by what the rewritten kernels compute (TVM's C build of the module) and by their IR."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import tvm

tirx = tvm.tirx


def _run(func, *arrays):
    """Build ``func`` with TVM for C and call it on numpy arrays (in place); returns the arrays."""
    lib = tvm.compile(func, target="c").jit(options=["-std=c++17"])
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    lib(*tensors)
    return [t.numpy() for t in tensors]


def _count(node, cls) -> int:
    found = []
    tvm.tirx.stmt_functor.post_order_visit(node, lambda n: found.append(n) if isinstance(n, cls) else None)
    return len(found)


def test_negative_constant_and_affine_indices_read_from_the_end():
    @T.prim_func
    def neg(A: T.Buffer((16,), T.float32), B: T.Buffer((5,), T.float32)):
        for i in T.serial(4):
            B[i] = A[-i - 1]
        B[4] = A[T.int32(-16)]

    out = tilelang.transform.LegalizeNegativeIndex()(tvm.IRModule({"main": neg}))["main"]
    text = out.script()
    assert "A[15 - i]" in text and "A[0]" in text, text
    a = np.arange(16, dtype="float32")
    _, b = _run(out, a, np.zeros(5, dtype="float32"))
    np.testing.assert_array_equal(b, [15, 14, 13, 12, 0])


def test_index_of_unknown_sign_or_already_positive_is_left_alone():
    @T.prim_func
    def sym(shift: T.int32, A: T.Buffer((16,), T.float32), B: T.Buffer((16,), T.float32)):
        for i in T.serial(8):
            B[i] = A[shift + i]
            B[i + 8] = A[i]

    mod = tvm.IRModule({"main": sym})
    out = tilelang.transform.LegalizeNegativeIndex()(mod)
    tvm.ir.assert_structural_equal(out["main"], sym)


def test_merge_if_joins_equal_conditions_and_keeps_the_result():
    @T.prim_func
    def two_ifs(A: T.Buffer((4,), T.int32), flag: T.int32):
        if flag > 0:
            A[0] = 1
        if flag > 0:
            A[1] = 2
        if flag > 1:
            A[2] = 3

    out = tilelang.transform.MergeIfStmt()(tvm.IRModule({"main": two_ifs}))["main"]
    assert _count(out.body, tirx.IfThenElse) == 2  # the two 'flag > 0' ifs became one
    lib = tvm.compile(out, target="c").jit(options=["-std=c++17"])
    for flag, expected in ((0, [0, 0, 0, 0]), (1, [1, 2, 0, 0]), (2, [1, 2, 3, 0])):
        t = tvm.runtime.tensor(np.zeros(4, dtype="int32"))
        lib(t, flag)
        np.testing.assert_array_equal(t.numpy(), expected)


def test_merge_if_keeps_a_condition_the_first_body_can_change():
    @T.prim_func
    def rewrites(A: T.Buffer((2,), T.int32)):
        if A[0] > 0:
            A[0] = 0
        if A[0] > 0:
            A[1] = 1

    out = tilelang.transform.MergeIfStmt()(tvm.IRModule({"main": rewrites}))["main"]
    assert _count(out.body, tirx.IfThenElse) == 2
    (a,) = _run(out, np.array([5, 7], dtype="int32"))
    np.testing.assert_array_equal(a, [0, 7])


def test_if_stmt_binding_evaluates_the_condition_once():
    @T.prim_func
    def body_changes_condition(A: T.Buffer((2,), T.int32)):
        if A[0] > 0:
            A[0] = 0
            A[1] = 1

    mod = tvm.IRModule({"main": body_changes_condition})
    bound = tilelang.transform.IfStmtBinding()(mod)
    assert _count(bound["main"].body, tirx.Bind) == 1
    merged = tilelang.transform.MergeIfStmt()(bound)["main"]
    assert _count(merged.body, tirx.IfThenElse) == 1  # guarded by the bound variable: safe to merge back
    (a,) = _run(merged, np.array([3, 7], dtype="int32"))
    np.testing.assert_array_equal(a, [0, 1])


def test_other_tilelang_passes_still_say_they_are_not_provided():
    with pytest.raises(AttributeError, match="LayoutInference.*not provided"):
        tilelang.transform.LayoutInference  # noqa: B018
