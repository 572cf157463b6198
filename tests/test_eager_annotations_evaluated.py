"""Eager kernels in a module *without* ``from __future__ import annotations``, and their call errors.

There, ``factor: T.float32`` in a signature is the dtype object itself, not annotation text.
T.float32 is a ``str`` subclass, so it was taken for a postponed annotation, evaluated as the
name ``float32`` (which fails) and dropped: the parameter became a compile-time value, baked into
the source, one new kernel (and disk cache entry) per value, and a str argument stopped inside
TVMScript instead of with the calling convention's ``TypeError``. The other test modules of the
eager style use the future import, which is why this one must not.
"""

import torch

import tilelang
import tilelang.language as T


def test_a_scalar_typed_in_the_signature_is_a_kernel_parameter():
    @tilelang.jit(target="c", execution_backend="cython")
    def scale(X, factor: T.float32, block: int = 128):
        N = T.const("N")
        X: T.Tensor[(N,), T.float32]
        Y = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] * factor
        return Y

    x = torch.randn(300)
    for factor in (0.5, 1.5, -2.0):
        torch.testing.assert_close(scale(x, factor), x * factor)
    assert len(scale.kernels) == 1
    try:
        scale(x, "2")
    except TypeError as exc:
        assert str(exc) == "scale() argument 'factor' (#1): expected a float, got str"
    else:
        raise AssertionError("a str factor was accepted")


def test_a_prim_func_with_outputs_and_a_typed_scalar():
    @T.prim_func
    def shift(A: T.Tensor((4,), T.float32), s: T.float32):
        B = T.empty((4,), T.float32)
        with T.Kernel(1) as bx:
            for i in T.serial(4):
                B[i] = A[i] + s
        return B

    kernel = tilelang.compile(shift, target="c")
    torch.testing.assert_close(kernel(torch.ones(4), 2.0), torch.full((4,), 3.0))


def test_a_list_for_a_tensor_parameter_is_the_calling_conventions_type_error():
    """It was an AttributeError ('list' object has no attribute 'shape') from reading T.const sizes."""

    @tilelang.jit(target="c", execution_backend="cython")
    def twice(X):
        N = T.const("N")
        X: T.Tensor[(N,), T.float32]
        Y = T.empty((N,), T.float32)
        with T.Kernel(1) as bx:
            for i in T.serial(N):
                Y[i] = X[i] * 2.0
        return Y

    for value, kind in (([1.0, 2.0], "list"), (3.0, "float")):
        try:
            twice(value)
        except TypeError as exc:
            assert str(exc) == f"twice() argument 'X' (#0): expected a torch.Tensor, got {kind}"
        else:
            raise AssertionError("accepted")
    torch.testing.assert_close(twice(torch.ones(3)), torch.full((3,), 2.0))


def test_an_output_shaped_by_a_scalar_parameter():
    """TileLang's ``def kernel(m: T.int32)`` with ``B = T.empty([m + 1], ...)``: one kernel, its
    output allocated for each call's ``m`` (before, ``m`` was a compile-time value by accident,
    and with the annotation read as a scalar the prologue stopped with NameError: m)."""

    @tilelang.jit(target="c", execution_backend="cython")
    def iota(m: T.int32):
        B = T.empty([m + 1], T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(m + 1):
                B[i] = T.cast(i, T.float32)
        return B

    for m in (23, 0, 5):
        torch.testing.assert_close(iota(m), torch.arange(m + 1, dtype=torch.float32))
    assert len(iota.kernels) == 1
