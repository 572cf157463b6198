"""``T.annotate_safe_value``: the value reads outside a buffer give, in ``T.copy`` and ``T.Parallel`` loads."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def _padded_copy(pad, dst_dtype=T.float32):
    @T.prim_func
    def padded(A: T.Tensor((20, 30), T.float32), B: T.Tensor((32, 32), dst_dtype)):
        with T.Kernel(2, 2, threads=16) as (bx, by):
            if pad is not None:
                T.annotate_safe_value({A: pad})
            T.copy(A[by * 16 : (by + 1) * 16, bx * 16 : (bx + 1) * 16], B[by * 16 : (by + 1) * 16, bx * 16 : (bx + 1) * 16])

    return padded


@pytest.mark.parametrize("pad, dst", [(None, T.float32), (-7.5, T.float32), (-99, T.float16)])
def test_tile_copy_pads_with_the_annotated_value(pad, dst):
    kernel = tilelang.compile(_padded_copy(pad, dst), target="c")
    a = torch.randn(20, 30)
    b = torch.empty(32, 32, dtype=getattr(torch, dst))
    kernel(a, b)
    expected = torch.full((32, 32), 0.0 if pad is None else float(pad)).to(b.dtype)
    expected[:20, :30] = a.to(b.dtype)
    torch.testing.assert_close(b, expected)


def test_element_copies_and_parallel_loads_are_guarded():
    @T.prim_func
    def shifted(A: T.Tensor((40,), T.int32), B: T.Tensor((48,), T.int32), C: T.Tensor((48,), T.int32)):
        with T.Kernel(1, threads=48):
            T.annotate_safe_value({A: -1})
            for i in T.Parallel(48):
                T.copy(A[i], B[i])
            for i in T.Parallel(48):
                C[i] = A[i - 4] * 2

    kernel = tilelang.compile(shifted, target="c")
    a = torch.arange(40, dtype=torch.int32)
    b = torch.zeros(48, dtype=torch.int32)
    c = torch.zeros(48, dtype=torch.int32)
    kernel(a, b, c)
    expected_b = torch.full((48,), -1, dtype=torch.int32)
    expected_b[:40] = a
    expected_c = torch.full((48,), -2, dtype=torch.int32)
    expected_c[4:44] = a * 2
    torch.testing.assert_close(b, expected_b)
    torch.testing.assert_close(c, expected_c)


def test_annotation_holds_only_in_its_scope():
    @T.prim_func
    def scoped(A: T.Tensor((8,), T.float32), B: T.Tensor((2, 12), T.float32), flag: T.int32):
        with T.Kernel(1, threads=1):
            if flag > 0:
                T.annotate_safe_value({A: 5.0})
                T.copy(A[0:12], B[0, 0:12])
            T.copy(A[0:12], B[1, 0:12])  # after the scope: zeros again

    kernel = tilelang.compile(scoped, target="c")
    a = torch.randn(8)
    b = torch.empty(2, 12)
    kernel(a, b, 1)
    torch.testing.assert_close(b[0], torch.cat([a, torch.full((4,), 5.0)]))
    torch.testing.assert_close(b[1], torch.cat([a, torch.zeros(4)]))


def test_bad_annotations_are_refused():
    with pytest.raises(TypeError, match="expects a dict"):

        @T.prim_func
        def not_a_dict(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                T.annotate_safe_value([A, 0])

    with pytest.raises(TypeError, match="keys must be buffers"):

        @T.prim_func
        def not_a_buffer(A: T.Tensor((8,), T.float32), n: T.int32):
            with T.Kernel(1, threads=1):
                T.annotate_safe_value({n: 0})
