"""Views of one storage that interleave without sharing a byte may both be written by a kernel
(tilelang_core.calling.footprints_disjoint, docs/backend-conventions.md "Overlapping arguments").

The overlap check compared byte ranges only, so the q and k column halves of a fused projection,
or the even and odd rows of a tensor, were refused as "overlap in memory" although no element is
shared; upstream TileLang runs such calls.
"""

from __future__ import annotations

import itertools
import pathlib
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tilelang
import tilelang.language as T
from tilelang_core.calling import footprints_disjoint, tensors_disjoint

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

OVERLAP = r"scale_two\(\) arguments 'P' \(#0\) and 'Q' \(#1\) overlap in memory, and the kernel writes 'P'"


def scale_two(row_stride: int):
    """``P *= 2`` and ``Q *= 3`` in place, both of shape ``(m, 4)`` with row stride ``row_stride``."""
    m = T.dynamic("m")

    @T.prim_func
    def scale_two(P: T.StridedTensor((m, 4), (row_stride, 1), "float32"),
                  Q: T.StridedTensor((m, 4), (row_stride, 1), "float32")):
        with T.Kernel(1) as _:
            for i, j in T.Parallel(m, 4):
                P[i, j] = P[i, j] * 2
                Q[i, j] = Q[i, j] * 3

    return scale_two


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_column_halves_and_alternate_rows_are_written_in_place(backend, target):
    halves = tilelang.compile(scale_two(8), target=target, execution_backend=backend)
    qk = torch.randn(3, 8)
    want = torch.cat([qk[:, :4] * 2, qk[:, 4:] * 3], 1)
    halves(qk[:, :4], qk[:, 4:])
    torch.testing.assert_close(qk, want)

    x = torch.randn(6, 4)  # its even and odd rows: shape (3, 4), row stride 8 too
    want = x.clone()
    want[0::2] *= 2
    want[1::2] *= 3
    halves(x[0::2], x[1::2])
    torch.testing.assert_close(x, want)


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_views_that_share_an_element_are_still_refused(backend, target):
    halves = tilelang.compile(scale_two(8), target=target, execution_backend=backend)
    qk = torch.randn(3, 8)
    before = qk.clone()
    with pytest.raises(ValueError, match=OVERLAP):
        halves(qk[:, :4], qk[:, 3:7])  # column 3 in both
    with pytest.raises(ValueError, match=OVERLAP):
        halves(qk[:, :4], qk[:, :4])
    torch.testing.assert_close(qk, before)  # refused before anything ran


def test_heads_of_a_fused_qkv_tensor_are_disjoint():
    qkv = torch.zeros(2, 5, 3, 4, 8)  # (batch, seq, q/k/v, heads, dim)
    assert tensors_disjoint(qkv[:, :, 0], qkv[:, :, 1])
    assert tensors_disjoint(qkv[:, :, 0, :2], qkv[:, :, 0, 2:])
    assert not tensors_disjoint(qkv[:, :, 0], qkv[:, :, 0, 1:])


def _bytes(start, shape, strides, size):
    touched = set()
    for index in itertools.product(*[range(n) for n in shape]):
        offset = start + size * sum(i * s for i, s in zip(index, strides))
        touched.update(range(offset, offset + size))
    return touched


_footprint = st.tuples(
    st.integers(0, 64),
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.lists(st.integers(0, 12), min_size=3, max_size=3),
    st.sampled_from([1, 2, 4]),
).map(lambda f: (f[0] * f[3], f[1], f[2][: len(f[1])], f[3]))


@settings(max_examples=3000, deadline=None)
@given(_footprint, _footprint)
def test_a_disjoint_answer_is_never_wrong(a, b):
    """The test is sufficient: whenever it says disjoint, no byte is shared (checked by listing them)."""
    if footprints_disjoint(a, b):
        assert not (_bytes(*a) & _bytes(*b)), (a, b)
