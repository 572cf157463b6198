"""Extents taken from numpy (``np.int64(8)``, a numpy array's shape) are ints here too.

``T.Tensor((np.int64(8),), ...)`` stopped with ``AssertionError: data must be int or Expr, but got 8``
from inside TVM's layouts, and ``T.alloc_shared((np.int32(8),), ...)`` with the same text at its
line; TileLang accepts both. A float extent (``N / 2``) is an OperandTypeError that says so.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.language.tileops._common import OperandTypeError


def test_numpy_integers_in_shapes_strides_and_tiles_are_ints():
    N = np.int32(8)

    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.StridedTensor((np.int64(4),), (np.int64(2),), "float32")):
        with T.Kernel(1) as bx:
            S = T.alloc_shared((np.int32(8),), "float32")
            for i in T.serial(N):
                S[i] = A[i] * 2.0
            for i in T.serial(4):
                B[i] = S[i] + S[i + 4]

    kernel = tilelang.compile(k, target="c", execution_backend="cython")
    a = torch.arange(8, dtype=torch.float32)
    b = torch.zeros(8)
    kernel(a, b[::2])
    torch.testing.assert_close(b[::2], a[:4] * 2 + a[4:] * 2)
    assert b[1::2].eq(0).all()


def test_a_float_extent_says_it_is_a_float():
    N = 8
    with pytest.raises(OperandTypeError, match=r"^T\.Tensor: shape \(4\.0,\): every extent must be an int .*got float "
                                               r"4\.0 \(N / 2 is a float in Python: write N // 2\)"):
        T.Tensor((N / 2,), "float32")  # what a kernel's annotation evaluates (without postponed annotations)
    with pytest.raises(OperandTypeError, match=r"strides \(1\.0,\)"):
        T.StridedTensor((4,), (1.0,), "float32")


def test_a_float_extent_in_a_kernel_signature_is_reported_with_postponed_annotations():
    """This file has ``from __future__ import annotations``: TVMScript fell back on the annotation's
    text when evaluating it failed and stopped with "Unexpected type for TIR Arg: ffi.String"
    (language/body_annotations.py)."""
    N = 8
    with pytest.raises(OperandTypeError, match=r"T\.Tensor: shape \(4\.0,\): every extent must be an int .*write N // 2"):

        @T.prim_func
        def k(A: T.Tensor((N / 2,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                A[0] = 1.0
