"""A float stored into a scalar that its first value typed as an integer is refused at the store.

``s = 0`` then ``s += A[i]`` of a float ``A`` truncated ``s`` to int32 at every step (0 for eight
0.75s, where Python gives 6.0), with only a C++ warning on stderr (language/inferred_scalars.py).
"""

from __future__ import annotations

import inspect

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

PATHS = [("cython", "c"), ("tvm_ffi", "llvm")]


def _line_of(func, text, nth=0):
    lines, first = inspect.getsourcelines(func)
    return [first + n for n, line in enumerate(lines) if text in line][nth]


def _define_sum_from_int_zero():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1):
            s = 0
            for i in T.serial(8):
                s += A[i]
            B[0] = s

    return k


def _define_plain_store_of_a_float():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            for i in T.serial(8):
                h = i
                h = A[i] * 0.5
                B[i] = h

    return k


def _define_store_of_a_python_float():
    @T.prim_func
    def k(B: T.Tensor((1,), "float32")):
        with T.Kernel(1):
            t = 1
            t = 2.5
            B[0] = t

    return k


@pytest.mark.parametrize("define,name,typed_at,stored_at,dtype", [
    (_define_sum_from_int_zero, "s", "s = 0", "s += A[i]", "float32"),
    (_define_plain_store_of_a_float, "h", "h = i", "h = A[i] * 0.5", "float32"),
    (_define_store_of_a_python_float, "t", "t = 1", "t = 2.5", "float32"),
])
def test_float_store_into_an_integer_typed_scalar_is_refused_at_the_store(define, name, typed_at, stored_at, dtype):
    with pytest.raises(LoweringError) as info:
        define()
    text = str(info.value)
    here = "test_inferred_scalar_stores.py"
    assert text.startswith(f"{inspect.getsourcefile(define)}:{_line_of(define, stored_at)}: {name} = ...: ")
    assert f"{name} is an int32 scalar (its first value, at " in text
    assert f"{here}:{_line_of(define, typed_at)}, is an integer), and this value is {dtype}" in text
    assert f"{name} = 0.0" in text and 'T.cast(value, "int32")' in text


@pytest.mark.parametrize("backend,target", PATHS)
def test_what_the_message_suggests_gives_pythons_sum(backend, target):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), I: T.Tensor((8,), "int32"), B: T.Tensor((3,), "float32")):
        with T.Kernel(1):
            s = 0.0
            n = 0
            c = 0
            for i in T.serial(8):
                s += A[i]
                n += I[i]
                c = c + T.cast(A[i] * 2.0, "int32")
            B[0] = s
            B[1] = n
            B[2] = c

    a = torch.full((8,), 0.75)
    ints = torch.arange(8, dtype=torch.int32)
    b = torch.zeros(3)
    tilelang.compile(k, target=target, execution_backend=backend)(a, ints, b)
    assert b.tolist() == [6.0, 28.0, 8.0]


@pytest.mark.parametrize("backend,target", PATHS)
def test_a_scalar_declared_with_its_dtype_keeps_the_conversion(backend, target):
    """``T.alloc_var("int32")`` names the dtype on purpose: a float stored there is converted."""

    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1):
            for i in T.serial(4):
                v = T.alloc_var("int32")
                v = A[i]
                B[i] = v

    b = torch.zeros(4, dtype=torch.int32)
    tilelang.compile(k, target=target, execution_backend=backend)(torch.tensor([1.7, -2.7, 3.0, 0.2]), b)
    assert b.tolist() == [1, -2, 3, 0]
