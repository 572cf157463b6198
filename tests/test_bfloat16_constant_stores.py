"""Stores of bfloat16 constants into bfloat16 tensors on the CPU paths and CUDA before sm_80.

TVM's ``BF16StorageLegalize`` rounds a stored float32 value through its bits,
``reinterpret(uint32, x)``; for a constant (``T.clear(O[a:b])``, ``T.fill(O[...], 3)``,
``O[i] = T.bfloat16(0)`` with ``O`` a bfloat16 tensor) TVM's C code generator printed
``*(uint32_t *)(&(0.000000e+00f))``, and the kernel did not compile on target ``c`` (cython and
tvm_ffi): "lvalue required as unary '&' operand". Those reinterpretations are folded right after
the legalizer (lowering/constant_casts.py ``FoldConstantReinterprets``).
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402


def _clear_regions():
    @T.prim_func
    def clear_regions(O: T.Tensor((20,), "bfloat16")):
        with T.Kernel(2, threads=1) as bx:
            T.clear(O[bx * 10 + 2 : bx * 10 + 5])
            T.fill(O[bx * 10 + 6 : bx * 10 + 8], 1.0078125)

    return clear_regions


def _constant_store():
    @T.prim_func
    def constant_store(O: T.Tensor((2, 16), "bfloat16")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.Parallel(16):
                O[bx, i] = T.bfloat16(-2.5)

    return constant_store


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_clear_and_fill_of_bfloat16_regions(path):
    o = torch.full((20,), 7.0, dtype=torch.bfloat16)
    compile_on(_clear_regions(), path)(o)
    want = torch.full((20,), 7.0, dtype=torch.bfloat16)
    for b in range(2):
        want[b * 10 + 2 : b * 10 + 5] = 0
        want[b * 10 + 6 : b * 10 + 8] = 1.0078125
    assert torch.equal(o, want)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_bfloat16_constant_stored_into_a_tensor(path):
    o = torch.zeros(2, 16, dtype=torch.bfloat16)
    compile_on(_constant_store(), path)(o)
    assert torch.equal(o, torch.full((2, 16), -2.5, dtype=torch.bfloat16))


@pytest.mark.parametrize("target", ["c", "cuda -arch=sm_75"])
def test_no_address_of_a_constant_in_the_source(target):
    from tilelang_core.lowering import lower

    src = lower(_clear_regions(), target=target).device_source
    assert "(&(0.000000e+00f))" not in src and "&(1.0" not in src, src
