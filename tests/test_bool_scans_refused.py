"""``T.cummax``/``T.cumsum`` of a bool tile.

A bool scan was refused as "dtype mismatch: source 'F' is bool and destination 'F' is bool",
which names no mismatch. The refusal now says that the scans take no bool tile and what to do
(cast the elements into an integer tile first), worded as T.reduce_*'s refusal of bool tiles.
Checked on a CUDA and a CPU target, in place and into another tile; an integer scan still lowers.
"""

from __future__ import annotations

import pytest

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower


def _kernel(op: str, src_dtype: str, dst_dtype, threads: int = 32):
    scan = getattr(T, op)

    @T.prim_func
    def scanned(A: T.Tensor((4, 8), src_dtype), B: T.Tensor((4, 8), dst_dtype or src_dtype)):
        with T.Kernel(1, threads=threads) as _:
            F = T.alloc_fragment((4, 8), src_dtype)
            T.copy(A, F)
            if dst_dtype is None:
                scan(F, dim=1)
                T.copy(F, B)
            else:
                G = T.alloc_fragment((4, 8), dst_dtype)
                scan(F, G, dim=1)
                T.copy(G, B)

    return scanned


@pytest.mark.parametrize("target", ["cuda -arch=sm_80", "c"])
@pytest.mark.parametrize("dst_dtype", [None, "bool", "int32"])
@pytest.mark.parametrize("op", ["cummax", "cumsum"])
def test_bool_scan_refusal_says_what_to_do(op, dst_dtype, target):
    with pytest.raises(LoweringError) as info:
        lower(_kernel(op, "bool", dst_dtype), target=target)
    message = str(info.value)
    assert "dtype mismatch" not in message
    assert f"T.{op} does not scan bool tiles" in message
    assert 'cast the elements into an integer tile first' in message and 'T.cast(a[i, j], "int32")' in message


@pytest.mark.parametrize("op", ["cummax", "cumsum"])
def test_integer_scan_still_lowers(op):
    assert lower(_kernel(op, "int32", "int32"), target="c").device_source
