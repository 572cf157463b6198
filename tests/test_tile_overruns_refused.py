"""A tile indexed past its end by a loop that provably runs there is a ``LoweringError`` at the
line (lowering/tile_bounds.py), on every target.

Before: on CPU targets the access guards kept element 0 of a 1-element fragment written by
``for i in T.Parallel(64): s[i] = x`` and dropped the rest (upstream's attention_sink backward
kernels with heads == 1 computed a wrong result without a word).
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError


def _overrun(alloc):
    @T.prim_func
    def k(X: T.Tensor([1], T.float32), Y: T.Tensor([64], T.float32)):
        with T.Kernel(1, threads=64):
            s = alloc([1], T.float32)
            for i in T.Parallel(64):
                s[i] = X[0]
            for i in T.Parallel(64):
                Y[i] = s[0]

    return k


@pytest.mark.parametrize("target", ["c", "llvm", "cuda"])
@pytest.mark.parametrize("alloc", [T.alloc_fragment, T.alloc_shared, T.alloc_local], ids=["fragment", "shared", "local"])
def test_a_tile_written_past_its_end_is_refused(target, alloc):
    with pytest.raises(LoweringError) as caught:
        tilelang.lower(_overrun(alloc), target=target)
    text = str(caught.value)
    assert "tile 's' has 1 element along axis 0, but its index i runs from 0 to 63 over the loop of 'i'" in text
    assert "test_tile_overruns_refused.py:" in text and "declare the tile with at least 64 elements" in text


def test_a_read_past_the_end_and_an_affine_index_are_refused():
    @T.prim_func
    def k(Y: T.Tensor([8], T.float32)):
        with T.Kernel(1, threads=8):
            s = T.alloc_fragment([16], T.float32)
            T.fill(s, 1.0)
            for i in T.serial(8):
                Y[i] = s[2 * i + 3]  # 3..17

    with pytest.raises(LoweringError, match=r"index 2 \* i \+ 3 runs from 3 to 17 over the loop of .i."):
        tilelang.lower(k, target="c")


def test_indices_that_are_not_known_exactly_keep_the_guards():
    """Under a condition, with a block index or a value read from memory, the access is guarded
    as before (docs/pipeline.md): only what provably runs past the tile is refused."""

    @T.prim_func
    def k(I: T.Tensor([8], T.int32), Y: T.Tensor([64], T.float32)):
        with T.Kernel(2, threads=64) as bx:
            s = T.alloc_fragment([4], T.float32)
            T.fill(s, 2.0)
            for i in T.Parallel(64):
                if i < 4:
                    s[i] = 3.0
            for i in T.Parallel(64):
                Y[i] = T.if_then_else(i < 4, s[i], 0.0) + s[I[i % 8]] + s[bx * 2]

    y = torch.zeros(64)
    idx = torch.tensor([0, 1, 2, 3, 100, 1, 2, 3], dtype=torch.int32)
    tilelang.compile(k, target="c", execution_backend="cython")(idx, y)
    expected = torch.where(torch.arange(64) < 4, 3.0, 0.0) + torch.where(idx[torch.arange(64) % 8] < 4, 3.0, 0.0)
    torch.testing.assert_close(y, expected + 3.0)  # s[bx * 2]: bx = 0 -> 3.0, bx = 1 -> s[2] = 3.0
