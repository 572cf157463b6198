"""Byte-exact scalar packing: the bytes the backend packs from the artifact's layout equal the bytes
of the kernel's own struct, built independently with ctypes from the struct declaration in the
Metal source (C and Metal lay these members out alike) and filled through its members, with the
16-bit floats converted by torch."""

from __future__ import annotations

import ctypes
import math

import pytest
import torch

import metal_kernels as MK
from tilelang_backend_metal import plan as P
from tilelang_backend_metal.packing import ScalarPacker, bfloat16_bits
from tilelang_backend_metal.source import struct_members

_PLAIN = {"int": ctypes.c_int32, "uint": ctypes.c_uint32, "float": ctypes.c_float, "long": ctypes.c_int64,
          "ulong": ctypes.c_uint64}


class _Union(ctypes.Union):
    _fields_ = [("v_int", ctypes.c_int32 * 2), ("v_bool", ctypes.c_bool), ("v_char", ctypes.c_int8),
                ("v_uchar", ctypes.c_uint8), ("v_short", ctypes.c_int16), ("v_ushort", ctypes.c_uint16),
                ("v_half", ctypes.c_uint16), ("v_bfloat", ctypes.c_uint16)]


_UNION_MEMBER = {"bool": "v_bool", "int8": "v_char", "uint8": "v_uchar", "int16": "v_short", "uint16": "v_ushort",
                 "float16": "v_half", "bfloat16": "v_bfloat"}


def _bits16(value: float, dtype: torch.dtype) -> int:
    return int(torch.tensor([value], dtype=torch.float32).to(dtype).view(torch.int16).item()) & 0xFFFF


def reference_bytes(source: str, type_name: str, dtypes: dict, values: dict) -> bytes:
    """The struct ``type_name`` of ``source`` as ctypes lays it out, with ``values`` by member name."""
    fields = []
    for mtype, name, count in struct_members(source, type_name):
        ctype = _Union if mtype == "__TVMArgUnion" else _PLAIN[mtype]
        fields.append((name, ctype * count if count else ctype))
    cls = type("ArgsT", (ctypes.Structure,), {"_fields_": fields})
    obj = cls()
    for mtype, name, count in struct_members(source, type_name):
        dtype, value = dtypes[name], values[name]
        if mtype == "__TVMArgUnion":
            member = _UNION_MEMBER[dtype]
            if dtype == "float16":
                value = _bits16(value, torch.float16)
            elif dtype == "bfloat16":
                value = _bits16(value, torch.bfloat16)
            setattr(getattr(obj, name), member, value)
        elif count:
            getattr(obj, name)[0] = value
        else:
            setattr(obj, name, value)
    return bytes(obj)


@pytest.fixture(scope="module")
def every():
    from tilelang_core.lowering import lower

    artifact = lower(MK.every_scalar(), target="metal")
    (launch,) = P.launches(P.make_plan(artifact, [1]))
    kernel = artifact.device_kernels[0]
    dtypes = {a.name: a.dtype for a in kernel.args if a.kind == "scalar"}
    return artifact, kernel, launch, dtypes


def _pack(every, values: dict) -> tuple[bytes, bytes]:
    artifact, kernel, launch, dtypes = every
    struct = kernel.scalar_struct
    ordered = [values[kernel.args[s.arg].name] for s in sorted(struct.slots, key=lambda s: s.offset)]
    got = launch.packer.pack(ordered)
    want = reference_bytes(artifact.device_source, struct.type_name, dtypes, values)
    return got, want


def test_every_dtype_packs_byte_for_byte(every):
    _, kernel, launch, dtypes = every
    values = {f"s_{d}": v for d, (v, _) in MK.SCALAR_VALUES.items()}
    values["n"] = 1000
    got, want = _pack(every, values)
    assert len(got) == kernel.scalar_struct.size == 8 * len(dtypes) == len(want)
    assert got == want
    words = launch.packer.words([values[kernel.args[s.arg].name] for s in kernel.scalar_struct.slots])
    assert all(isinstance(w, int) and -(1 << 63) <= w < (1 << 63) for w in words)
    assert ScalarPacker.bytes_of(words) == want  # what torch hands Metal for the list of ints


@pytest.mark.parametrize(
    "case",
    [
        {"s_int8": -128, "s_uint8": 255, "s_int16": -32768, "s_uint16": 65535, "s_int32": -(1 << 31),
         "s_uint32": (1 << 32) - 1, "s_int64": -(1 << 63), "s_uint64": (1 << 64) - 1, "s_bool": False},
        {"s_int8": 127, "s_int16": 32767, "s_int32": (1 << 31) - 1, "s_int64": (1 << 63) - 1, "s_bool": 1},
        {"s_float16": 65504.0, "s_bfloat16": 3.0e38, "s_float32": -0.0},
        {"s_float16": 1e-8, "s_bfloat16": 1.00390625, "s_float32": 1.401298464324817e-45},  # tiny, ties to even
        {"s_float16": 70000.0, "s_bfloat16": -1e39, "s_float32": 1e39},  # too large: infinities
        {"s_float16": -math.inf, "s_bfloat16": math.inf, "s_float32": math.inf},
    ],
)
def test_extreme_values_pack_as_c_conversions_would(every, case):
    values = {f"s_{d}": v for d, (v, _) in MK.SCALAR_VALUES.items()}
    values["n"] = 7
    values.update(case)
    got, want = _pack(every, values)
    assert got == want


def test_nan_stays_nan(every):
    values = {f"s_{d}": v for d, (v, _) in MK.SCALAR_VALUES.items()}
    values.update(n=1, s_float16=math.nan, s_bfloat16=math.nan, s_float32=math.nan)
    _, kernel, launch, _ = every
    slots = {s.field: s for s in kernel.scalar_struct.slots}
    raw = launch.packer.pack([values[kernel.args[s.arg].name] for s in kernel.scalar_struct.slots])
    half = int.from_bytes(raw[slots["s_float16"].offset:][:2], "little")
    bf = int.from_bytes(raw[slots["s_bfloat16"].offset:][:2], "little")
    f32 = int.from_bytes(raw[slots["s_float32"].offset:][:4], "little")
    assert half & 0x7C00 == 0x7C00 and half & 0x3FF
    assert bf & 0x7F80 == 0x7F80 and bf & 0x7F
    assert f32 & 0x7F800000 == 0x7F800000 and f32 & 0x7FFFFF


@pytest.mark.parametrize("value", [0.0, 1.0, -2.5, 1.00390625, 1.01171875, 3.14159, 1e-40, 6.5e4, 3.3e38])
def test_bfloat16_rounding_matches_torch(value):
    assert bfloat16_bits(value) == _bits16(value, torch.bfloat16)


def test_padding_bytes_are_zero_and_slots_do_not_overlap(every):
    _, kernel, launch, _ = every
    struct = kernel.scalar_struct
    ones = {f"s_{d}": (True if d == "bool" else 1) for d in MK.SCALAR_VALUES}
    ones["n"] = 1
    raw = launch.packer.pack([ones[kernel.args[s.arg].name] for s in struct.slots])
    for slot in struct.slots:
        width = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
                 "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8}[slot.dtype]
        assert raw[slot.offset + width : slot.offset + slot.size] == bytes(slot.size - width), slot.field
