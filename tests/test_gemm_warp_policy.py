"""``T.GemmWarpPolicy``'s helpers, as TileLang has them: configuration builders written for TileLang
(tile-ai's tilelang-benchmark dequantize-matmul autotuner) call ``from_warp_partition`` and the
``is_*`` tests; they stopped with a bare ``AttributeError``. The policy still has no effect on
TileLang-Core's ``T.gemm`` (docs/compatibility.md)."""

from __future__ import annotations

import pytest

import tilelang.language as T

P = T.GemmWarpPolicy


@pytest.mark.parametrize("m_warp,n_warp,policy", [
    (4, 1, P.FullRow), (1, 4, P.FullCol), (2, 2, P.Square), (1, 1, P.Square), (8, 1, P.FullRow),
])
def test_a_warp_grid_names_its_policy(m_warp, n_warp, policy):
    assert P.from_warp_partition(m_warp, n_warp) is policy


def test_each_policy_answers_only_its_own_test():
    answers = {p: (p.is_square(), p.is_full_row(), p.is_full_col()) for p in P}
    assert answers == {P.Square: (True, False, False), P.FullRow: (False, True, False),
                       P.FullCol: (False, False, True)}


@pytest.mark.parametrize("policy,M,N,warps,split", [
    (P.FullRow, 128, 64, 4, (4, 1)),   # 128 rows take 4 warps of 16 rows
    (P.FullRow, 32, 64, 4, (2, 2)),    # 32 rows take 2; the other 2 go to columns
    (P.FullRow, 8, 64, 4, (1, 4)),     # fewer rows than one warp's 16 (TileLang: ZeroDivisionError)
    (P.FullCol, 64, 32, 8, (2, 4)),    # 32 columns take 4 warps of 8
    (P.FullCol, 64, 64, 8, (1, 8)),
    (P.Square, 128, 128, 4, (2, 2)),   # the split whose per-warp tile keeps C's square shape
    (P.Square, 64, 256, 8, (2, 4)),    # C 1:4, each warp 32 x 64 (16-row, 8-column units: 2 x 8)
    (P.Square, 16, 8, 4, (1, 1)),      # no exact split fits
])
def test_the_warp_split_of_each_policy(policy, M, N, warps, split):
    assert policy.compute_warp_partition(M, N, warps) == split


@pytest.mark.parametrize("args,name", [((0, 64, 4), "M"), ((64, -8, 4), "N"), ((64, 64, 2.0), "num_warps")])
def test_a_bad_size_is_named(args, name):
    with pytest.raises(ValueError, match=f"compute_warp_partition: {name} must be a positive int, got"):
        P.Square.compute_warp_partition(*args)
