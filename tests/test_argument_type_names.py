"""numpy's bool at a kernel's call: taken by bool and int scalars (it has no ``__index__``), and
named ``numpy.bool`` where it is refused, on every CPU backend (a type named like a builtin keeps
its module in messages: ``calling.type_name``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy
import pytest
import torch

import tilelang
import tilelang_core.language as T
from tilelang_core.calling import type_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


def gated():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32"), on: T.bool, k: T.int32):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(4):
                B[i] = T.if_then_else(on, A[i] * T.Cast("float32", k), A[i])

    return main


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_numpy_bools_are_bools_and_are_named_with_their_module(backend, target):
    kernel = tilelang.compile(gated(), out_idx=[1], target=target, execution_backend=backend)
    a = torch.arange(4, dtype=torch.float32)
    assert torch.equal(kernel(a, numpy.bool_(True), 3), a * 3)
    assert torch.equal(kernel(a, numpy.bool_(False), 3), a)
    assert torch.equal(kernel(a, True, numpy.bool_(True)), a)  # an int takes it as 1, as it takes True
    with pytest.raises(TypeError, match=r"^main\(\) argument 'A' \(#0\): expected a torch\.Tensor, got numpy\.bool$"):
        kernel(numpy.bool_(True), True, 3)
    with pytest.raises(TypeError, match=r"^main\(\) argument 'on' \(#1\): expected a bool, got float64$"):
        kernel(a, numpy.float64(1.0), 3)  # a float subclass: refused as a float is


def test_type_names_keep_the_module_only_for_names_of_builtins():
    assert type_name(numpy.bool_(True)) == "numpy.bool"
    assert type_name(numpy.int32(1)) == "int32" and type_name(torch.zeros(1)) == "Tensor"
    assert type_name(True) == "bool" and type_name(None) == "NoneType" and type_name("s") == "str"


def scalars():
    @T.prim_func
    def main(Y: T.Tensor((1,), "float32"), s: T.float32, i: T.int32, flag: T.bool):
        with T.Kernel(1, threads=1) as bx:
            Y[0] = s + T.Cast("float32", i) + T.Cast("float32", flag)

    return main


class IndexOnly:
    """An int-like object without ``__float__``."""

    def __index__(self):
        return 3


#: (what, the call's (s, i, flag), the exception, its text after "main() argument ").
REFUSED = [
    ("numpy complex", (numpy.complex128(2 + 3j), 1, True), TypeError, "'s' (#0): expected a float, got complex128"),
    ("numpy complex64", (numpy.complex64(1), 1, True), TypeError, "'s' (#0): expected a float, got complex64"),
    ("array of one for a float", (numpy.array([1.0]), 1, True), TypeError, "'s' (#0): expected a float, got ndarray"),
    ("__index__ only for a float", (IndexOnly(), 1, True), TypeError, "'s' (#0): expected a float, got IndexOnly"),
    ("array for an int", (1.0, numpy.array([3]), True), TypeError, "'i' (#1): expected an int, got ndarray"),
    ("float array for an int", (1.0, numpy.array(1.0), True), TypeError, "'i' (#1): expected an int, got ndarray"),
    ("numpy int out of range", (1.0, numpy.int64(2**40), True), ValueError,
     "'i' (#1): value 1099511627776 does not fit in int32"),
    ("2**64 for a bool", (1.0, 1, 2**64), ValueError,
     "'flag' (#2): expected a bool (True/False, 0 or 1), got 18446744073709551616"),
    ("numpy uint64 for a bool", (1.0, 1, numpy.uint64(2**64 - 1)), ValueError,
     "'flag' (#2): expected a bool (True/False, 0 or 1), got 18446744073709551615"),
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_numpy_values_a_scalar_cannot_take_are_refused_alike(backend, target):
    kernel = tilelang.compile(scalars(), out_idx=[0], target=target, execution_backend=backend)
    assert kernel(numpy.float32(1.5), numpy.int16(2), numpy.bool_(True)).tolist() == [4.5]
    assert kernel(numpy.array(1.5), numpy.array(2), True).tolist() == [4.5]  # 0-d arrays are numbers
    for what, args, error, text in REFUSED:
        with pytest.raises(error) as info:
            kernel(*args)
        assert str(info.value) == f"main() argument {text}", what
