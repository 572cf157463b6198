"""Casts of integer constants wrap around as a C conversion does (TVM's constant folding refused
every value outside the new type: "cannot make uint from negative value -5")."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower
from tilelang_core.lowering.constant_casts import wrapped

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

#: (source dtype, value, target dtype), each cast once in the kernel, in this order
CASES = [
    ("int16", -5, "uint32"),
    ("uint16", 65535, "uint8"),
    ("int64", 300, "int8"),
    ("int32", -1, "uint16"),
    ("uint32", 4294967295, "int32"),
    ("int64", -(2**40) - 3, "int32"),
    ("int8", -128, "uint64"),
]


def _kernel(n):
    @T.prim_func
    def casts(X: T.Tensor((n,), T.int64), Out: T.Tensor((n, len(CASES)), T.int64)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                g = bx * 32 + i
                if g < n:
                    Out[g, 0] = T.cast(X[g] + T.cast(T.cast(T.int16(-5), "uint32"), "int64"), "int64")
                    Out[g, 1] = T.cast(T.cast(T.uint16(65535), "uint8"), "int64") + X[g]
                    Out[g, 2] = T.cast(T.cast(T.int64(300), "int8"), "int64") + X[g]
                    Out[g, 3] = T.cast(T.cast(T.int32(-1), "uint16"), "int64") + X[g]
                    Out[g, 4] = T.cast(T.cast(T.uint32(4294967295), "int32"), "int64") + X[g]
                    Out[g, 5] = T.cast(T.cast(T.int64(-(2**40) - 3), "int32"), "int64") + X[g]
                    Out[g, 6] = T.cast(T.cast(T.cast(T.int8(-128), "uint64"), "uint32"), "int64") + X[g]

    return casts


def _numpy_cast(value, source, target):
    return int(np.array([value], dtype=source).astype(target)[0])


def test_wrapped_is_numpys_conversion():
    for source, value, target in CASES:
        assert wrapped(value, target) == _numpy_cast(value, source, target), (source, value, target)


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_casts_of_constants_compile_and_wrap(backend, target, dynamic):
    n = 40
    kernel = tilelang.compile(_kernel(T.dynamic("n") if dynamic else n), target=target, execution_backend=backend)
    x = torch.arange(n, dtype=torch.int64)
    out = torch.zeros(n, len(CASES), dtype=torch.int64)
    kernel(x, out)
    consts = [_numpy_cast(v, s, t) for s, v, t in CASES]
    consts[-1] = consts[-1] & 0xFFFFFFFF  # the last one goes on to uint32
    want = torch.tensor(consts, dtype=torch.int64)[None, :] + x[:, None]
    assert torch.equal(out, want), (out[0], want[0])


def test_casts_of_constants_lower_for_cuda():
    source = lower(_kernel(40), target="cuda -arch=sm_80").kernel_source
    assert "4294967291" in source  # (uint32)-5, folded


def _reinterpret_kernel():
    @T.prim_func
    def bits(F: T.Tensor((3,), T.float32), D: T.Tensor((1,), T.float64), U: T.Tensor((2,), T.int64)):
        with T.Kernel(1, threads=1) as bx:
            F[0] = T.reinterpret("float32", T.uint32(0x3F800000))
            F[1] = T.reinterpret("float32", T.int32(-8388608))  # 0xFF800000: -inf
            F[2] = T.reinterpret("float32", T.uint32(0x00000001))  # the smallest subnormal
            D[0] = T.reinterpret("float64", T.int64(0x400921FB54442D18))  # pi
            U[0] = T.cast(T.reinterpret("uint32", T.float32(2.0)), "int64")
            U[1] = T.reinterpret("int64", T.float64(-0.0))

    return bits


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_reinterpreted_constants_compile_and_keep_their_bits(backend, target):
    """``T.reinterpret`` of a constant: TVM's C code generator took the constant's address
    ("lvalue required as unary '&' operand") on target c."""
    kernel = tilelang.compile(_reinterpret_kernel(), target=target, execution_backend=backend)
    f, d, u = torch.zeros(3), torch.zeros(1, dtype=torch.float64), torch.zeros(2, dtype=torch.int64)
    kernel(f, d, u)
    assert f.view(torch.int32).tolist() == [0x3F800000, -8388608, 1]
    assert d.view(torch.int64).tolist() == [0x400921FB54442D18]
    assert u.tolist() == [0x40000000, -(2**63)]
