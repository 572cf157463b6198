"""A tensor the kernel writes whose elements overlap one another is refused at the call.

A parameter with declared strides (``T.StridedTensor((m, 4), (s, 1))``) takes views torch makes
with any strides, among them views in which several elements are one memory location
(``zeros(4).as_strided((8, 4), (0, 1))``: every row is the same memory; strides ``(2, 1)``: rows
share elements). Writing into one gave wrong results on every CPU path (and a data race on a
GPU); torch refuses in-place writes into such tensors too. Reading one is fine: a read-only
parameter still accepts it. Compact parameters were safe already (the contiguity check refuses
stride 0).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.calling import elements_overlap
from tilelang_core.conformance import kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

B = 64


def copy_to_strided():
    """``Y = X``: the written Y has the declared row stride ``s``."""
    m, s = T.dynamic("m"), T.dynamic("s")

    @T.prim_func
    def copy_rows(X: T.Tensor((m, 4), "float32"), Y: T.StridedTensor((m, 4), (s, 1), "float32")):
        with T.Kernel(T.ceildiv(m, B), threads=B) as bx:
            for i, j in T.Parallel(B, 4):
                if bx * B + i < m:
                    Y[bx * B + i, j] = X[bx * B + i, j]

    return copy_rows


def _message(strides, shape):
    return (f"copy_rows() argument 'Y' (#1): expected a tensor whose elements do not overlap (it is written), "
            f"got strides {strides} for shape {shape}; pass a tensor with its own memory per element (.contiguous())")


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("storage,strides", [(4, (0, 1)), (18, (2, 1)), (25, (3, 1))],
                         ids=["stride0", "stride2", "stride3"])
def test_an_overlapping_written_tensor_is_refused(backend, target, storage, strides):
    kernel = tilelang.compile(copy_to_strided(), target=target, execution_backend=backend)
    X = torch.arange(32.0).reshape(8, 4)
    base = torch.full((storage,), -1.0)
    Y = base.as_strided((8, 4), strides)
    with pytest.raises(ValueError) as info:
        kernel(X, Y)
    assert str(info.value) == _message(strides, (8, 4))
    assert torch.equal(base, torch.full((storage,), -1.0))  # nothing was written


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_non_overlapping_strided_view_is_written(backend, target):
    kernel = tilelang.compile(copy_to_strided(), target=target, execution_backend=backend)
    X = torch.arange(32.0).reshape(8, 4)
    big = torch.full((16, 4), -1.0)
    kernel(X, big[::2])  # every other row: strides (8, 1)
    assert torch.equal(big[::2], X)
    assert torch.equal(big[1::2], torch.full((8, 4), -1.0))
    wide = torch.full((8, 6), -1.0)
    kernel(X, wide[:, 1:5])  # rows of a wider tensor: strides (6, 1), gaps between rows
    assert torch.equal(wide[:, 1:5], X)
    assert torch.equal(wide[:, 0], torch.full((8,), -1.0)) and torch.equal(wide[:, 5], torch.full((8,), -1.0))
    one = torch.full((4,), -1.0)
    kernel(X[:1], one.as_strided((1, 4), (0, 1)))  # one row: its stride is never used
    assert torch.equal(one, X[0])
    kernel(X[:0], torch.zeros(0).as_strided((0, 4), (0, 1)))  # no elements: nothing overlaps


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("storage,strides", [(4, (0, 1)), (18, (2, 1))], ids=["stride0", "stride2"])
def test_an_overlapping_read_only_tensor_is_accepted(backend, target, storage, strides):
    kernel = tilelang.compile(kernels.rowstride(), target=target, execution_backend=backend)  # reads X, declared strides
    X = torch.arange(float(storage)).as_strided((8, 4), strides)
    Y = torch.full((8, 4), -1.0)
    kernel(X, Y)
    assert torch.equal(Y, X.contiguous())


@pytest.mark.parametrize(("shape", "strides", "overlap"), [
    ((8, 4), (4, 1), False),
    ((8, 4), (0, 1), True),
    ((8, 4), (2, 1), True),
    ((8, 4), (8, 1), False),
    ((8, 4), (1, 8), False),  # column-major
    ((8, 4), (1, 7), True),
    ((8, 4), (-4, 1), False),  # negative strides: by their size
    ((8, 4), (4, -1), False),
    ((1, 4), (0, 1), False),  # size-1 dimensions have any stride
    ((8, 1), (1, 0), False),
    ((0, 4), (0, 0), False),  # no elements
    ((2, 3, 4), (12, 4, 1), False),
    ((2, 3, 4), (4, 8, 1), False),  # a permutation of a compact tensor
    ((2, 3, 4), (12, 3, 1), True),
    ((2, 3), (3, 2), True),  # offsets 0 2 4 3 5 7 are distinct: the documented false positive
])
def test_elements_overlap(shape, strides, overlap):
    assert elements_overlap(shape, strides) is overlap
