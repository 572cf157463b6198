"""Reading a cubin: a 64-bit little-endian ELF file with NVIDIA's sections.

Only what the backend checks is read: the architecture in the ELF header, the sections, the
kernel symbols, and per kernel the parameter layout NVIDIA's assembler records in
``.nv.info.<kernel>`` (``EIATTR_KPARAM_INFO``: ordinal, offset and size of each parameter;
``EIATTR_CBANK_PARAM_SIZE``: the bytes of all parameters). The build hook compares that layout
with the launch plan, so a kernel can never be launched with arguments its code does not expect.

No library of the kind exists for NVIDIA's ``.nv.info`` records, and the ELF part is a dozen
``struct`` reads, so this module has no dependencies.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190

#: ``.nv.info`` record formats and the attributes read here.
_EIFMT_SVAL = 0x04
_EIATTR_KPARAM_INFO = 0x17
_EIATTR_CBANK_PARAM_SIZE = 0x19

_STT_FUNC = 2


class CubinError(ValueError):
    """The bytes are not a cubin, or not one this module can read."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


@dataclass
class KernelInfo:
    """What a cubin records about one kernel."""

    name: str
    param_sizes: list[int] = field(default_factory=list)
    """Bytes of each parameter, in parameter order (from EIATTR_KPARAM_INFO)."""
    param_offsets: list[int] = field(default_factory=list)
    param_bytes: int = 0
    """Total parameter bytes (EIATTR_CBANK_PARAM_SIZE)."""


@dataclass
class CubinInfo:
    sm: int
    """The SM number in the ELF header: 90 for sm_90 (also for sm_90a)."""
    sections: dict[str, Section]
    functions: list[str]
    """Names of the function symbols."""
    kernels: dict[str, KernelInfo]


def _sections(data: bytes) -> list[Section]:
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shstrndx >= max(shnum, 1):
        raise CubinError("truncated ELF section table")
    raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = raw[shstrndx][4]

    def name(offset: int) -> str:
        start = names_at + offset
        return data[start : data.index(b"\0", start)].decode(errors="replace")

    return [Section(name(r[0]), r[1], r[4], r[5], r[6], r[9]) for r in raw]


def _symbols(data: bytes, sections: list[Section]) -> list[tuple[str, int]]:
    found = []
    for sec in sections:
        if sec.type != 2 or sec.entsize != 24:  # SHT_SYMTAB
            continue
        strtab = sections[sec.link]
        for i in range(sec.size // 24):
            st_name, st_info = struct.unpack_from("<IB", data, sec.offset + 24 * i)
            if st_name == 0:
                continue
            start = strtab.offset + st_name
            found.append((data[start : data.index(b"\0", start)].decode(errors="replace"), st_info & 0xF))
    return found


def _kernel_info(name: str, blob: bytes) -> KernelInfo:
    info = KernelInfo(name)
    params: dict[int, tuple[int, int]] = {}
    i = 0
    while i + 4 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", blob, i + 2)
            payload = blob[i + 4 : i + 4 + size]
            i += 4 + size
        else:
            payload = blob[i + 2 : i + 4]
            i += 4
        if attr == _EIATTR_KPARAM_INFO and len(payload) >= 12:
            _index, ordinal, offset, word = struct.unpack_from("<IHHI", payload)
            params[ordinal] = (offset, (word >> 18) & 0x3FFF)
        elif attr == _EIATTR_CBANK_PARAM_SIZE and len(payload) >= 2:
            (info.param_bytes,) = struct.unpack_from("<H", payload)
    for ordinal in sorted(params):
        offset, size = params[ordinal]
        info.param_offsets.append(offset)
        info.param_sizes.append(size)
    return info


def read_cubin(data: bytes) -> CubinInfo:
    """Parse ``data``; :raises CubinError: not a 64-bit little-endian CUDA ELF."""
    if len(data) < 0x40 or data[:4] != ELF_MAGIC:
        raise CubinError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise CubinError("not a 64-bit little-endian ELF file")
    (machine,) = struct.unpack_from("<H", data, 0x12)
    if machine != EM_CUDA:
        raise CubinError(f"ELF machine {machine} is not CUDA ({EM_CUDA})")
    (flags,) = struct.unpack_from("<I", data, 0x30)
    try:
        sections = _sections(data)
        symbols = _symbols(data, sections)
    except (struct.error, ValueError, IndexError) as exc:
        raise CubinError(f"cannot read the ELF sections: {exc}") from None
    by_name = {s.name: s for s in sections}
    functions = [n for n, kind in symbols if kind == _STT_FUNC]
    kernels = {}
    for fn in functions:
        sec = by_name.get(f".nv.info.{fn}")
        if sec is not None:
            kernels[fn] = _kernel_info(fn, data[sec.offset : sec.offset + sec.size])
    return CubinInfo(sm=(flags >> 8) & 0xFF, sections=by_name, functions=functions, kernels=kernels)


def section_bytes(data: bytes, info: CubinInfo, name: str) -> bytes:
    """The contents of section ``name`` (empty for sections without file contents)."""
    sec = info.sections[name]
    if sec.type == 8:  # SHT_NOBITS
        return b""
    return data[sec.offset : sec.offset + sec.size]
