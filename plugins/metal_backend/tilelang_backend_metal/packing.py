"""Packing a kernel's scalar arguments into the bytes of its constant struct, from the artifact's layout.

The layout (:class:`~tilelang_core.artifact.ScalarStruct`) gives each scalar its byte offset, the
dtype it is stored as and its slot size; everything else in the struct is zero. The bytes are
handed to ``torch.mps.compile_shader``'s kernels as a list of Python ints, which torch passes to
Metal as ``int64`` values with ``setBytes`` (8 bytes each, little-endian): the struct is padded to
a multiple of 8 bytes and read back as signed 64-bit words. Nothing is allocated on the device.

Stored forms (little-endian): integers in their width (the checker has already refused values
that do not fit), ``bool`` as one byte 0/1, ``float32`` as IEEE single, ``float16`` as IEEE half,
``bfloat16`` as the upper half of the float32 rounded to nearest even. A float too large for its
width becomes an infinity of its sign, as a C conversion would.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Sequence

from tilelang_core.artifact import ScalarStruct

#: struct-module format of each stored dtype ('H' for bfloat16: its bit pattern).
FORMATS: dict[str, str] = {
    "bool": "?",
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float16": "e",
    "bfloat16": "H",
    "float32": "f",
}

_WIDTH = {"?": 1, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8, "e": 2, "f": 4}


def bfloat16_bits(value: float) -> int:
    """The bfloat16 bit pattern of ``value`` (round to nearest even; NaN stays a quiet NaN)."""
    if math.isnan(value):
        return 0x7FC0
    try:
        (bits,) = struct.unpack("<I", struct.pack("<f", value))
    except OverflowError:
        return 0xFF80 if value < 0 else 0x7F80
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded & 0xFFFF


def _to_float(value: float, code: str) -> float:
    """``value``, or the infinity of its sign when it does not fit ``code`` ('e' or 'f')."""
    try:
        struct.pack("<" + code, value)
        return value
    except OverflowError:
        return math.copysign(math.inf, value)


class ScalarPacker:
    """Packs one kernel's scalars: ``words(values)`` -> the struct as a list of int64 words.

    :param layout: the kernel's scalar struct.
    :raises ValueError: a slot's dtype cannot be stored, a slot too small for its value, or slots
        that overlap.
    """

    def __init__(self, layout: ScalarStruct) -> None:
        self.layout = layout
        self.size = -(-layout.size // 8) * 8
        parts = ["<"]
        at = 0
        self._bfloat = []
        self._floats = []
        for k, slot in enumerate(sorted(layout.slots, key=lambda s: s.offset)):
            code = FORMATS.get(slot.dtype)
            if code is None:
                raise ValueError(f"cannot store a {slot.dtype} scalar in a Metal argument struct")
            if slot.offset < at or _WIDTH[code] > slot.size:
                raise ValueError(f"scalar slot {slot.field!r} at byte {slot.offset} overlaps or is too small")
            if slot.offset > at:
                parts.append(f"{slot.offset - at}x")
            parts.append(code)
            at = slot.offset + _WIDTH[code]
            if slot.dtype == "bfloat16":
                self._bfloat.append(k)
            elif code in "ef":
                self._floats.append((k, code))
        if at > self.size:
            raise ValueError(f"scalar slots end at byte {at}, past the struct's {layout.size} bytes")
        if self.size > at:
            parts.append(f"{self.size - at}x")
        self._order = [s.arg for s in sorted(layout.slots, key=lambda s: s.offset)]
        self._struct = struct.Struct("".join(parts))
        self._words = struct.Struct(f"<{self.size // 8}q")

    @property
    def args(self) -> list[int]:
        """``DeviceKernel.args`` index of each value :meth:`pack` takes, in order."""
        return list(self._order)

    def pack(self, values: Sequence[Any]) -> bytes:
        """The struct's bytes for the scalar values, given in :attr:`args` order."""
        values = list(values)
        for k in self._bfloat:
            values[k] = bfloat16_bits(float(values[k]))
        try:
            return self._struct.pack(*values)
        except (OverflowError, struct.error):
            for k, code in self._floats:
                values[k] = _to_float(float(values[k]), code)
            return self._struct.pack(*values)

    def words(self, values: Sequence[Any]) -> list[int]:
        """The struct as signed 64-bit words (what the shader library's kernel is called with)."""
        return list(self._words.unpack(self.pack(values)))

    @staticmethod
    def bytes_of(words: Sequence[int]) -> bytes:
        """The bytes torch passes for ``words`` (little-endian int64 each): the inverse of :meth:`words`."""
        return struct.pack(f"<{len(words)}q", *words)
