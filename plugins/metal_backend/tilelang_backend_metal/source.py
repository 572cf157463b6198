"""Reading the Metal source: each kernel's signature and scalar struct, checked against the artifact.

The backend trusts nothing it cannot see: before a kernel is launched, the source it compiles
must declare every device kernel of the artifact with the parameters the launch plan passes:

* pointer argument ``i`` (in ``DeviceKernel.args`` order) is ``device <T>* <name> [[ buffer(i) ]]``,
  ``<T>`` the Metal type of the argument's dtype;
* when the kernel has scalars, ``constant <type_name>& arg [[ buffer(p) ]]`` with ``p`` and
  ``<type_name>`` from the artifact's :class:`~tilelang_core.artifact.ScalarStruct`, and the struct's
  members in slot order with the types the slots' dtypes need (``int n[2]``, ``long x``,
  ``__TVMArgUnion h``), every union member the kernel reads declared;
* every other parameter is a thread-position attribute (``[[threadgroup_position_in_grid]]``, ...).

A mismatch is a :class:`~tilelang_core.errors.BuildError` at build and an
:class:`~tilelang_core.errors.ArtifactError` at load (the caller chooses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from tilelang_core.artifact import DeviceKernel, KernelArtifact, ScalarStruct

#: Metal type of each tensor element dtype a kernel may take.
METAL_TYPES: dict[str, str] = {
    "bool": "bool",
    "int8": "char",
    "uint8": "uchar",
    "int16": "short",
    "uint16": "ushort",
    "int32": "int",
    "uint32": "uint",
    "int64": "long",
    "uint64": "ulong",
    "float16": "half",
    "bfloat16": "bfloat",
    "float32": "float",
}

#: Other Metal types a buffer of a dtype may have in TVM's source, with the same memory layout:
#: TVM 0.27 stores bfloat16 as ``ushort`` on Metal (its bits, computed in float32).
SAME_LAYOUT_TYPES: dict[str, tuple[str, ...]] = {"bfloat16": ("ushort",)}

#: Struct member (type, array length) holding a scalar of each dtype, and the union member read.
SCALAR_MEMBERS: dict[str, tuple[str, Optional[int], Optional[str]]] = {
    "int32": ("int", 2, None),
    "uint32": ("uint", 2, None),
    "float32": ("float", 2, None),
    "int64": ("long", None, None),
    "uint64": ("ulong", None, None),
    "bool": ("__TVMArgUnion", None, "v_bool"),
    "int8": ("__TVMArgUnion", None, "v_char"),
    "uint8": ("__TVMArgUnion", None, "v_uchar"),
    "int16": ("__TVMArgUnion", None, "v_short"),
    "uint16": ("__TVMArgUnion", None, "v_ushort"),
    "float16": ("__TVMArgUnion", None, "v_half"),
    "bfloat16": ("__TVMArgUnion", None, "v_bfloat"),
}

#: Thread-position attributes Metal fills in for a kernel parameter.
POSITION_ATTRIBUTES = frozenset(
    {
        "threadgroup_position_in_grid",
        "thread_position_in_threadgroup",
        "thread_position_in_grid",
        "threads_per_threadgroup",
        "threadgroups_per_grid",
        "threads_per_grid",
        "thread_index_in_threadgroup",
        "thread_index_in_simdgroup",
        "simdgroup_index_in_threadgroup",
        "threads_per_simdgroup",
    }
)

_PARAM = re.compile(
    r"^(?:(?P<space>device|constant|threadgroup|thread)\s+)?(?:const\s+)?(?P<type>[A-Za-z_]\w*)\s*"
    r"(?P<ref>[*&])?\s*(?P<name>[A-Za-z_]\w*)\s*\[\[\s*(?P<attr>[A-Za-z_]\w*)\s*(?:\(\s*(?P<index>\d+)\s*\))?\s*\]\]$"
)
_MEMBER = re.compile(r"^\s*(?P<type>[A-Za-z_]\w*)\s+(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*(?P<count>\d+)\s*\])?\s*;\s*$")


class SourceMismatch(ValueError):
    """The Metal source does not declare what the artifact says (the message says what)."""


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a Metal kernel as the source declares it."""

    space: Optional[str]
    """Address space: 'device', 'constant', ... (None for thread-position parameters)."""
    type: str
    ref: Optional[str]
    """'*' (pointer), '&' (reference) or None (by value)."""
    name: str
    attribute: str
    """'buffer' or a thread-position attribute."""
    index: Optional[int]
    """The buffer index of a 'buffer' parameter."""


@dataclass(frozen=True)
class KernelSignature:
    """A ``kernel void <name>(...)`` of the source, with its body."""

    name: str
    params: tuple[KernelParam, ...]
    body: str

    @property
    def buffers(self) -> dict[int, KernelParam]:
        """The buffer parameters by index."""
        return {p.index: p for p in self.params if p.attribute == "buffer" and p.index is not None}


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [" ".join(p.split()) for p in parts]


def _matching(text: str, start: int, opening: str, closing: str) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    raise SourceMismatch(f"unbalanced {opening}{closing} in the Metal source")


def parse_kernels(source: str) -> dict[str, KernelSignature]:
    """Every ``kernel void`` function of a Metal source, by name.

    :raises SourceMismatch: a kernel parameter this reader does not understand.
    """
    kernels: dict[str, KernelSignature] = {}
    for match in re.finditer(r"\bkernel\s+void\s+([A-Za-z_]\w*)\s*\(", source):
        name = match.group(1)
        close = _matching(source, match.end() - 1, "(", ")")
        open_body = source.index("{", close)
        body = source[open_body : _matching(source, open_body, "{", "}") + 1]
        params = []
        for text in _split_params(source[match.end() : close]):
            m = _PARAM.match(text)
            if m is None:
                raise SourceMismatch(f"kernel {name!r}: cannot read parameter {text!r}")
            index = m.group("index")
            params.append(
                KernelParam(
                    space=m.group("space"),
                    type=m.group("type"),
                    ref=m.group("ref"),
                    name=m.group("name"),
                    attribute=m.group("attr"),
                    index=int(index) if index is not None else None,
                )
            )
        if name in kernels:
            raise SourceMismatch(f"the Metal source defines kernel {name!r} twice")
        kernels[name] = KernelSignature(name=name, params=tuple(params), body=body)
    return kernels


def struct_members(source: str, type_name: str) -> list[tuple[str, str, Optional[int]]]:
    """``(type, name, array length)`` of each member of ``struct <type_name>`` in the source."""
    match = re.search(r"\bstruct\s+" + re.escape(type_name) + r"\s*\{", source)
    if match is None:
        raise SourceMismatch(f"the Metal source does not define struct {type_name!r}")
    body = source[match.end() : _matching(source, match.end() - 1, "{", "}")]
    members = []
    for line in body.split(";"):
        if not line.strip():
            continue
        m = _MEMBER.match(line + ";")
        if m is None:
            raise SourceMismatch(f"struct {type_name}: cannot read member {line.strip()!r}")
        count = m.group("count")
        members.append((m.group("type"), m.group("name"), int(count) if count else None))
    return members


def union_members(source: str) -> set[str]:
    """Names of the members ``union __TVMArgUnion`` declares (empty when there is none)."""
    match = re.search(r"\bunion\s+__TVMArgUnion\s*\{", source)
    if match is None:
        return set()
    body = source[match.end() : _matching(source, match.end() - 1, "{", "}")]
    return {m.group("name") for m in (_MEMBER.match(x + ";") for x in body.split(";") if x.strip()) if m}


def check_kernel(kernel: DeviceKernel, signature: KernelSignature, source: str) -> None:
    """Raise :class:`SourceMismatch` unless ``signature`` takes what the plan passes ``kernel``."""
    where = f"kernel {kernel.name!r}"
    pointers = [a for a in kernel.args if a.kind == "pointer"]
    scalars = [(i, a) for i, a in enumerate(kernel.args) if a.kind == "scalar"]
    buffers = signature.buffers
    for index, arg in enumerate(pointers):
        param = buffers.get(index)
        want = METAL_TYPES.get(arg.dtype)
        if want is None:
            raise SourceMismatch(f"{where}: argument {arg.name!r} has dtype {arg.dtype}, which Metal kernels cannot take")
        allowed = (want, *SAME_LAYOUT_TYPES.get(arg.dtype, ()))
        if param is None or param.space != "device" or param.ref != "*" or param.type not in allowed:
            got = "nothing" if param is None else f"'{param.space} {param.type}{param.ref or ''} {param.name}'"
            raise SourceMismatch(
                f"{where}: buffer({index}) should be 'device {want}*' for argument {arg.name!r}, the source has {got}"
            )
    struct = kernel.scalar_struct
    expected = len(pointers) + (1 if scalars else 0)
    if sorted(buffers) != list(range(expected)):
        raise SourceMismatch(f"{where}: the source binds buffers {sorted(buffers)}, the launch plan passes buffers "
                             f"0..{expected - 1}")
    for param in signature.params:
        if param.attribute != "buffer" and param.attribute not in POSITION_ATTRIBUTES:
            raise SourceMismatch(f"{where}: parameter {param.name!r} has attribute [[{param.attribute}]], "
                                 "which this backend does not fill in")
    if not scalars:
        return
    if struct is None:
        raise SourceMismatch(f"{where} takes scalar arguments but the artifact does not describe its scalar struct "
                             "(an artifact from before the scalar layout was part of the contract: recompile)")
    check_struct(kernel, struct, signature, source)


def check_struct(kernel: DeviceKernel, struct: ScalarStruct, signature: KernelSignature, source: str) -> None:
    """The scalar struct: bound where the layout says, members in slot order, of the slot dtypes."""
    where = f"kernel {kernel.name!r}"
    param = signature.buffers.get(struct.binding)
    if param is None or param.space != "constant" or param.ref != "&" or param.type != struct.type_name:
        raise SourceMismatch(f"{where}: buffer({struct.binding}) should be 'constant {struct.type_name}&', the source "
                             f"has {'nothing' if param is None else repr(param.space + ' ' + param.type)}")
    scalars = [(i, a) for i, a in enumerate(kernel.args) if a.kind == "scalar"]
    if [s.arg for s in struct.slots] != [i for i, _ in scalars]:
        raise SourceMismatch(f"{where}: the scalar struct's slots are for args {[s.arg for s in struct.slots]}, "
                             f"the kernel's scalar args are {[i for i, _ in scalars]}")
    members = struct_members(source, struct.type_name)
    if [m[1] for m in members] != [s.field for s in struct.slots]:
        raise SourceMismatch(f"{where}: struct {struct.type_name} has members {[m[1] for m in members]}, the layout "
                             f"says {[s.field for s in struct.slots]}")
    declared = union_members(source)
    end = 0
    for slot, (mtype, name, count) in zip(struct.slots, members):
        if slot.dtype != kernel.args[slot.arg].dtype:
            raise SourceMismatch(f"{where}: slot {name!r} stores {slot.dtype}, the argument is "
                                 f"{kernel.args[slot.arg].dtype}")
        want = SCALAR_MEMBERS.get(slot.dtype)
        if want is None:
            raise SourceMismatch(f"{where}: scalar {name!r} has dtype {slot.dtype}, which Metal kernels cannot take")
        if (mtype, count) != want[:2]:
            raise SourceMismatch(f"{where}: struct member {name!r} is {mtype}{f'[{count}]' if count else ''}, "
                                 f"a {slot.dtype} slot needs {want[0]}{f'[{want[1]}]' if want[1] else ''}")
        member = want[2]
        if member is not None and f"arg.{name}.{member}" in signature.body and member not in declared:
            raise SourceMismatch(f"{where} reads arg.{name}.{member}, which union __TVMArgUnion does not declare")
        if slot.offset < end or slot.size < 1:
            raise SourceMismatch(f"{where}: scalar slots overlap at {name!r}")
        end = slot.offset + slot.size
    if end > struct.size:
        raise SourceMismatch(f"{where}: scalar slots end at byte {end}, past the struct's {struct.size} bytes")


def check_source(artifact: KernelArtifact) -> dict[str, KernelSignature]:
    """Parse the artifact's Metal source and check every device kernel against it.

    :raises SourceMismatch: with what does not match.
    """
    source = artifact.device_source or ""
    kernels = parse_kernels(source)
    for kernel in artifact.device_kernels:
        signature = kernels.get(kernel.name)
        if signature is None:
            raise SourceMismatch(f"the Metal source has no kernel {kernel.name!r} (it has: {', '.join(kernels) or 'none'})")
        check_kernel(kernel, signature, source)
    return kernels
