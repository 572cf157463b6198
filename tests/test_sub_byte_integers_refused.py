"""Integer types narrower than 8 bits (``int4``, ``uint2``) are refused on every target, naming
the tensor (lowering/cpu_dtypes.py, ``refuse_sub_byte_integers``).

Before: ``c`` stopped in TVM's code generator with "Cannot convert type int4 to C type" (no line,
no tensor); ``llvm`` built a kernel whose int4 parameter no torch tensor can fill; ``cuda`` read
each element as the whole 32-bit word it is packed in, a silently wrong kernel.
"""

from __future__ import annotations

import pytest

import tilelang
import tilelang.language as T
from tilelang_core.errors import TargetFeatureError


def _widen(dtype):
    @T.prim_func
    def widen(A: T.Tensor((4, 8), dtype), C: T.Tensor((4, 8), T.int32)):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                C[i, j] = T.cast(A[i, j], T.int32)

    return widen


def _narrowing_cast():
    @T.prim_func
    def narrow(A: T.Tensor((8,), T.int32), C: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                C[i] = T.cast(T.cast(A[i], "uint2"), T.int32)

    return narrow


@pytest.mark.parametrize("target", ["c", "llvm", "cuda"])
@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2"])
def test_a_sub_byte_integer_tensor_is_refused_naming_it(target, dtype):
    with pytest.raises(TargetFeatureError) as caught:
        tilelang.lower(_widen(dtype), target=target)
    text = str(caught.value)
    assert f"uses {dtype} (tensor parameter 'A'), which the {target} target does not provide" in text
    assert "test_sub_byte_integers_refused.py:" in text  # the kernel's line
    assert "as an int8 (or uint8) tensor and unpack them in the kernel" in text


def test_a_conversion_to_a_sub_byte_integer_is_refused():
    with pytest.raises(TargetFeatureError, match=r"uses uint2 \(the conversion"):
        tilelang.lower(_narrowing_cast(), target="c")


def test_bool_and_byte_integers_are_not_sub_byte():
    from tilelang_core.lowering.cpu_dtypes import _sub_byte_integer

    assert [d for d in ("bool", "int8", "uint8", "int16", "int64", "float4_e2m1fn", "int4", "uint1")
            if _sub_byte_integer(d)] == ["int4", "uint1"]
