"""``i == j`` / ``i != j`` computed in a plain Python helper a kernel calls.

Outside TVMScript's parser, ``==`` and ``!=`` of two TIR expressions give TVM's lazy ``EqualOp`` /
``NotEqualOp``, which TVM's own functions take as the comparison. The operand checks refused them
("the condition must be a scalar expression ..., got EqualOp"); upstream's
``examples/block_causal_attention`` builds its masks this way (language/operand_checks.py,
``as_expression``).
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def _same_block(i, j, block):
    return i // block == j // block


def _differ(i, j):
    return i != j


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "llvm")])
@pytest.mark.parametrize("block", [1, 2])
def test_helper_comparisons_as_conditions(backend, target, block):
    @T.prim_func
    def k(Y: T.Tensor([8, 8], T.float32), Z: T.Tensor([8, 8], T.float32), W: T.Tensor([8, 8], T.float32)):
        with T.Kernel(1, threads=1):
            for i, j in T.Parallel(8, 8):
                Y[i, j] = T.if_then_else(_same_block(i, j, block), 1.0, 0.0)
                Z[i, j] = T.max(T.if_then_else(_differ(i, j), 2.0, 0.0), 0.5)
                if _same_block(i, j, block):
                    W[i, j] = 1.0
                else:
                    W[i, j] = 0.0

    y, z, w = torch.zeros(8, 8), torch.zeros(8, 8), torch.zeros(8, 8)
    tilelang.compile(k, target=target, execution_backend=backend)(y, z, w)
    idx = torch.arange(8)
    same = (idx[:, None] // block == idx[None, :] // block).float()
    torch.testing.assert_close(y, same)
    torch.testing.assert_close(w, same)
    torch.testing.assert_close(z, torch.where(idx[:, None] != idx[None, :], 2.0, 0.5))


def test_helper_comparisons_in_run_time_checks():
    """``T.device_assert`` and ``assert`` test the comparison when the kernel runs (the lazy
    comparison's Python truth is whether the two sides are the same object, not their values)."""

    @T.prim_func
    def k(A: T.Tensor([8], T.int32), Y: T.Tensor([8], T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                assert _same_block(A[i], i, 1), "A[i] is not i"
                T.device_assert(_differ(A[i], -1), "A[i] is -1")
                Y[i] = 1.0

    kernel = tilelang.compile(k, target="c", execution_backend="cython")
    y = torch.zeros(8)
    kernel(torch.arange(8, dtype=torch.int32), y)
    assert y.tolist() == [1.0] * 8
    bad = torch.arange(8, dtype=torch.int32)
    bad[5] = 0
    with pytest.raises(RuntimeError, match="A\\[i\\] is not i"):
        kernel(bad, y)
    bad[:] = -1
    bad[0] = 0
    with pytest.raises(RuntimeError, match="A\\[i\\] is"):
        kernel(bad, y)
