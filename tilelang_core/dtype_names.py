"""The canonical dtype names, without importing TVM (capability declarations validate against them).

:mod:`tilelang_core.language.dtypes` builds TileLang's dtype objects from the same lists.
"""

from __future__ import annotations

#: Every scalar dtype name, as TVM spells it.
SCALAR_DTYPES = (
    "bool",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
)
#: The lane counts of vector dtypes (``float16x2`` ... ``float32x64``); ``bool`` has none.
VECTOR_LANES = (2, 4, 8, 16, 32, 64)


def is_canonical_dtype(name: str) -> bool:
    """Whether ``name`` is a scalar dtype name or a vector one (``<scalar>x<lanes>``)."""
    if name in SCALAR_DTYPES:
        return True
    scalar, sep, lanes = name.rpartition("x")
    return bool(sep) and scalar in SCALAR_DTYPES and scalar != "bool" and lanes.isdigit() and int(lanes) in VECTOR_LANES


__all__ = ["SCALAR_DTYPES", "VECTOR_LANES", "is_canonical_dtype"]
