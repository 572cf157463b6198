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
