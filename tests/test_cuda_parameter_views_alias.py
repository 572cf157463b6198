"""A CUDA kernel given one tensor's storage twice (a ``T.view``/``T.reshape`` of a tensor parameter
used beside it) has no ``__restrict__`` pointer parameters (lowering/parameter_views.py).

The view is a second pointer parameter of the device function (``A_ptr_1``) holding ``A_ptr``'s
address; both were ``__restrict__``, a promise to nvcc that they do not alias, under which it
may move a store through one past a load through the other or read through the read-only cache.
Kernels without such a view keep ``__restrict__``.
"""

from __future__ import annotations

import re

import tilelang.language as T
from tilelang_core.lowering import lower


def _signature(kernel) -> str:
    source = lower(kernel, target="cuda").device_source
    return re.search(r'extern "C" __global__ void[^;{]*\{', source).group(0)


def test_a_view_of_a_tensor_parameter_drops_restrict():
    @T.prim_func
    def write_view_read_tensor(A: T.Tensor((8, 16), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            V = T.view(A, (128,))
            for i in T.Parallel(128):
                V[i] = 1.0
                B[i] = A[i // 16, i % 16]

    signature = _signature(write_view_read_tensor)
    assert "A_ptr_1" in signature and "__restrict__" not in signature, signature


def test_a_reshape_and_a_view_of_another_dtype_drop_restrict():
    @T.prim_func
    def reshaped(A: T.Tensor((8, 16), "float32"), B: T.Tensor((8, 16), "int32")):
        with T.Kernel(1, threads=128) as bx:
            R = T.reshape(A, (128,))
            Bits = T.view(T.reshape(A, (16, 8)), (16, 8), dtype="int32")
            for i in T.Parallel(128):
                B[i // 16, i % 16] = Bits[i // 8, i % 8] + T.cast(R[i], "int32") + T.cast(A[i // 16, i % 16], "int32")

    signature = _signature(reshaped)
    assert "__restrict__" not in signature, signature


def test_kernels_without_a_view_of_a_parameter_keep_restrict():
    @T.prim_func
    def shared_view(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((8, 16), "float32")
            V = T.view(S, (128,))
            for i in T.Parallel(128):
                V[i] = A[i]
            for i in T.Parallel(128):
                B[i] = S[i // 16, i % 16]

    signature = _signature(shared_view)
    assert signature.count("__restrict__") == 2, signature
