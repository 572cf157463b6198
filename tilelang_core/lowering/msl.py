"""Metal Shading Language sources from TVM's code generator, made whole and described to backends.

TVM 0.27 writes the Metal source of a kernel as one section per device kernel (``// Function:
<name>``), each repeating ``#include <metal_stdlib>``, ``using namespace metal;`` and ``union
__TVMArgUnion``. Every pointer argument of a device kernel is bound to ``[[buffer(i)]]`` in argument
order, and every scalar argument (dynamic sizes included) is a member of one ``struct
<kernel>_args_t`` bound as ``constant <kernel>_args_t& arg [[buffer(p)]]``, in 8-byte slots. This
module turns that into what a backend can compile and call:

* **one translation unit**: the sections are merged so that every top-level item appears once
  (a library holding several kernels would otherwise define the union twice);
* **the union fix**: for ``bool``, 8- and 16-bit scalar parameters TVM reads union members
  (``arg.b.v_bool``, ``arg.h.v_half``, ``v_char``, ``v_uchar``, ``v_short``, ``v_ushort``,
  ``v_bfloat``) that its union does not declare, so such kernels would not compile. The merged
  union declares every member the kernels read, each at offset 0 of its 8-byte slot;
* **the scalar layout as data**: each kernel's struct is parsed into a
  :class:`~tilelang_core.artifact.ScalarStruct` (member, byte offset, stored dtype, slot size), and
  checked against the kernel's arguments, so a backend packs the bytes from the artifact and a
  change in TVM's layout is a :class:`~tilelang_core.errors.LoweringError` here, not wrong values
  on a device;
* **scalar names Metal cannot take**: TVM names each struct member after its parameter, so a
  scalar parameter (or dynamic size) called ``device``, ``kernel``, ``half``, ``constant``,
  ``thread``, ... gave ``struct main_kernel_args_t { float device[2]; };`` and ``arg.device[0]``,
  which Metal's compiler refuses (reserved words, :data:`METAL_RESERVED`). Such members are
  renamed here (``tl_device``; :func:`safe_member_names`), in the struct and where the kernel reads
  them; the slot's ``field`` is the new name, the argument keeps its own, and a backend packs by
  slot order, not by name. A scalar called ``arg`` or ``A_ptr`` (names TVM's generator gives the
  struct and the pointers) is a member ``arg_1``/``A_ptr_1``, valid Metal that the layout check used
  to refuse ("struct main_kernel_args_t has members ['arg_1'], but kernel 'main_kernel' takes
  scalars ['arg']"): it is accepted now. A scalar called ``threadIdx`` or ``blockIdx`` stopped TVM's
  generator with a bare check failure; :func:`check_generator_names` refuses it first, naming it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Optional

from ..artifact import DeviceKernel, ScalarSlot, ScalarStruct
from ..errors import LoweringError

UNION_NAME = "__TVMArgUnion"

#: Union member (and its MSL type) through which TVM reads a scalar of each dtype.
UNION_MEMBERS: dict[str, tuple[str, str]] = {
    "bool": ("v_bool", "bool"),
    "int8": ("v_char", "char"),
    "uint8": ("v_uchar", "uchar"),
    "int16": ("v_short", "short"),
    "uint16": ("v_ushort", "ushort"),
    "float16": ("v_half", "half"),
    "bfloat16": ("v_bfloat", "bfloat"),
}

#: Struct member TVM declares for a scalar of each dtype that is not read through the union:
#: (MSL type, array length or None).
PLAIN_MEMBERS: dict[str, tuple[str, Optional[int]]] = {
    "int32": ("int", 2),
    "uint32": ("uint", 2),
    "float32": ("float", 2),
    "int64": ("long", None),
    "uint64": ("ulong", None),
}

#: Bytes and alignment of the MSL types a scalar struct member may have.
_TYPE_LAYOUT: dict[str, tuple[int, int]] = {
    "int": (4, 4),
    "uint": (4, 4),
    "float": (4, 4),
    "long": (8, 8),
    "ulong": (8, 8),
    UNION_NAME: (8, 4),
}

#: Words a Metal struct member cannot be called (Metal Shading Language specification, sections 2
#: and 4-5: address-space and function qualifiers, scalar, vector and matrix type names, the C++14
#: keywords and alternative tokens a Python parameter may be called, and metal_stdlib's macros),
#: besides C++'s reserved identifiers (``__x``, ``_X``): :func:`is_reserved`.
METAL_RESERVED: frozenset = frozenset(
    ["device", "constant", "thread", "threadgroup", "threadgroup_imageblock", "ray_data", "object_data",
     "kernel", "vertex", "fragment", "visible", "intersection", "mesh", "object", "stitchable", "metal",
     "uniform", "imageblock", "sampler"]
    + [f"{p}{t}{n}" for t in ("bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half",
                              "float", "bfloat") for p in ("", "packed_") for n in ("", "2", "3", "4")
       if p == "" or n]
    + [f"{t}{r}x{c}" for t in ("half", "float", "bfloat") for r in "234" for c in "234"]
    + ["size_t", "ptrdiff_t", "void", "double", "signed", "unsigned", "wchar_t", "char16_t", "char32_t",
       "alignas", "alignof", "asm", "auto", "case", "catch", "const", "constexpr", "const_cast", "decltype",
       "default", "delete", "do", "dynamic_cast", "enum", "explicit", "export", "extern", "false", "friend",
       "goto", "inline", "mutable", "namespace", "new", "noexcept", "nullptr", "operator", "private",
       "protected", "public", "register", "reinterpret_cast", "sizeof", "static", "static_assert",
       "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "typedef",
       "typeid", "typename", "union", "using", "virtual", "volatile", "bitand", "bitor", "compl", "and_eq",
       "not_eq", "or_eq", "xor", "xor_eq", "INFINITY", "NAN", "MAXFLOAT", "MAXHALF", "HUGE_VALF", "HUGE_VALH",
       "FP_ILOGB0", "FP_ILOGBNAN"]
)
_RESERVED_PATTERN = re.compile(
    r"__|_[A-Z]|M_[A-Z0-9_]+$|(FLT|HALF|BFLOAT|DBL|CHAR|SCHAR|UCHAR|SHRT|USHRT|INT|UINT|LONG|ULONG)_[A-Z0-9_]+$"
)

#: Names TVM's Metal generator gives the kernel's thread positions: a scalar of one of these names
#: stops it ("Check failed: name_supply_->FreshName(\"threadIdx\") == \"threadIdx\"").
GENERATOR_NAMES = ("threadIdx", "blockIdx")

_MEMBER = re.compile(r"^\s*(?P<type>[A-Za-z_]\w*)\s+(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*(?P<count>\d+)\s*\])?\s*;\s*$")
_UNION_READ = re.compile(r"\barg\.(?P<field>[A-Za-z_]\w*)\.(?P<member>v_\w+)")


def split_items(source: str) -> list[str]:
    """The top-level items of a generated Metal source, in order, without blank lines.

    An item is a preprocessor line, a comment line, or a declaration or definition up to where
    its braces close and it ends (``};``, ``}`` or ``;``). The generated code holds no string or
    character literals, so counting braces is enough.
    """
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for line in source.splitlines():
        stripped = line.strip()
        if not current:
            if not stripped:
                continue
            if stripped.startswith("#") or stripped.startswith("//"):
                items.append(stripped)
                continue
        current.append(line.rstrip())
        depth += line.count("{") - line.count("}")
        if depth < 0:
            raise LoweringError(f"unbalanced braces in the generated Metal source near: {stripped}")
        if depth == 0 and (stripped.endswith(";") or stripped.endswith("}")):
            items.append("\n".join(current))
            current = []
    if current:
        items.append("\n".join(current))
    return items


def _is_union(item: str) -> bool:
    return re.match(r"union\s+" + re.escape(UNION_NAME) + r"\b", item) is not None


def _struct_members(item: str) -> list[tuple[str, str, Optional[int]]]:
    body = item[item.index("{") + 1 : item.rindex("}")]
    members = []
    for line in body.splitlines():
        if not line.strip():
            continue
        match = _MEMBER.match(line)
        if match is None:
            raise LoweringError(f"cannot read member {line.strip()!r} of the generated Metal struct:\n{item}")
        count = match.group("count")
        members.append((match.group("type"), match.group("name"), int(count) if count else None))
    return members


def _find(items: list[str], pattern: str) -> Optional[str]:
    regex = re.compile(pattern)
    return next((item for item in items if regex.match(item)), None)


def is_reserved(name: str) -> bool:
    """Whether a Metal struct member cannot be called ``name`` (:data:`METAL_RESERVED`)."""
    return name in METAL_RESERVED or _RESERVED_PATTERN.match(name) is not None


def _names_member(member: str, name: str) -> bool:
    """Whether struct member ``member`` is the one for scalar ``name``: the name itself, TVM's
    fresh name for it (``arg_1`` where the generator took ``arg``), or :func:`safe_member_names`'s."""
    fresh = r"(?:_\d+)?"
    return (re.fullmatch(re.escape(name) + fresh, member) is not None
            or re.fullmatch("tl_" + re.escape(name.lstrip("_")) + fresh, member) is not None)


def _kernel_struct(items: list[str], kernel: DeviceKernel) -> Optional[tuple[int, int, str]]:
    """``(signature index, struct index, struct type)`` of ``kernel``'s scalar struct in ``items``."""
    regex = re.compile(r"kernel\s+void\s+" + re.escape(kernel.name) + r"\s*\(")
    signature = next((i for i, item in enumerate(items) if regex.match(item)), None)
    if signature is None:
        return None
    bound = re.search(r"constant\s+([A-Za-z_]\w*)\s*&\s*arg\s*\[\[", items[signature])
    if bound is None:
        return None
    regex = re.compile(r"struct\s+" + re.escape(bound.group(1)) + r"\s*\{")
    definition = next((i for i, item in enumerate(items) if regex.match(item)), None)
    return None if definition is None else (signature, definition, bound.group(1))


def safe_member_names(items: list[str], kernels: list[DeviceKernel]) -> list[str]:
    """``items`` with every scalar struct member that has a reserved name (:func:`is_reserved`,
    or the struct's own name) renamed ``tl_<name>`` (``_1``, ... if taken), in the struct and in
    the kernel's reads ``arg.<name>``; the members keep their order (module docstring)."""
    items = list(items)
    for kernel in kernels:
        found = _kernel_struct(items, kernel)
        if found is None:  # scalar_struct says what is missing
            continue
        signature, definition, type_name = found
        names = [name for _, name, _ in _struct_members(items[definition])]
        taken = set(names)
        for name in names:
            if not (is_reserved(name) or name == type_name):
                continue
            base = new = "tl_" + name.lstrip("_")
            k = 0
            while new in taken or is_reserved(new):
                k += 1
                new = f"{base}_{k}"
            taken.add(new)
            member = re.compile(r"(?m)^(\s*[A-Za-z_]\w*\s+)" + re.escape(name) + r"(\s*(?:\[\s*\d+\s*\])?\s*;\s*)$")
            items[definition] = member.sub(lambda m: m.group(1) + new + m.group(2), items[definition])
            items[signature] = re.sub(r"\barg\." + re.escape(name) + r"\b", "arg." + new, items[signature])
    return items


def check_generator_names(func: Any) -> None:
    """Refuse a PrimFunc for Metal whose scalar parameter or dynamic size has one of the names TVM's
    Metal generator gives the thread positions (:data:`GENERATOR_NAMES`), before that generator
    stops on a bare check failure.

    :raises LoweringError: naming the parameter, why, and what to do.
    """
    from tvm import tirx

    params = list(func.params)
    for var in params + list(tirx.analysis.undefined_vars(func.body, params)):
        name = str(getattr(var, "name", ""))
        if name in GENERATOR_NAMES and not str(var.ty.dtype).startswith("handle"):
            what = "scalar parameter" if any(var.same_as(p) for p in params) else "dynamic size"
            raise LoweringError(
                f"{what} {name!r} cannot be passed to a Metal kernel: {name!r} is a name TVM's Metal code "
                "generator uses (the kernel's thread position); rename it"
            )


def scalar_struct(kernel: DeviceKernel, items: list[str], where: str) -> Optional[ScalarStruct]:
    """The layout of ``kernel``'s scalar struct, read from the source and checked against its args."""
    scalars = [(i, a) for i, a in enumerate(kernel.args) if a.kind == "scalar"]
    pointers = sum(1 for a in kernel.args if a.kind == "pointer")
    signature = _find(items, r"kernel\s+void\s+" + re.escape(kernel.name) + r"\s*\(")
    if signature is None:
        raise LoweringError(f"{where}: the generated Metal source has no kernel {kernel.name!r}")
    bound = re.search(r"constant\s+([A-Za-z_]\w*)\s*&\s*arg\s*\[\[\s*buffer\(\s*(\d+)\s*\)\s*\]\]", signature)
    if not scalars:
        if bound is not None:
            raise LoweringError(f"{where}: Metal kernel {kernel.name!r} takes a scalar struct but has no scalar argument")
        return None
    if bound is None:
        raise LoweringError(
            f"{where}: Metal kernel {kernel.name!r} has scalar arguments but no 'constant ...& arg [[buffer(p)]]' parameter"
        )
    type_name, binding = bound.group(1), int(bound.group(2))
    if binding != pointers:
        raise LoweringError(
            f"{where}: Metal kernel {kernel.name!r} binds its scalar struct to buffer({binding}), "
            f"expected buffer({pointers}) after its {pointers} pointer argument(s)"
        )
    definition = _find(items, r"struct\s+" + re.escape(type_name) + r"\s*\{")
    if definition is None:
        raise LoweringError(f"{where}: the generated Metal source does not define struct {type_name!r}")
    members = _struct_members(definition)
    if len(members) != len(scalars) or not all(_names_member(m[1], a.name) for m, (_, a) in zip(members, scalars)):
        raise LoweringError(
            f"{where}: struct {type_name} has members {[m[1] for m in members]}, but kernel {kernel.name!r} "
            f"takes scalars {[a.name for _, a in scalars]} in that order"
        )
    reads = {m.group("field"): m.group("member") for m in _UNION_READ.finditer(signature)}
    slots: list[ScalarSlot] = []
    offset = 0
    largest = 1
    placed: list[tuple[int, int]] = []  # (offset, bytes) per member
    for (index, arg), (mtype, name, count) in zip(scalars, members):
        expected = _expected_member(arg.dtype)
        got = (mtype, count)
        if got != expected:
            raise LoweringError(
                f"{where}: struct {type_name} declares scalar {name!r} ({arg.dtype}) as "
                f"{_show(mtype, name, count)}, expected {_show(expected[0], name, expected[1])}; this TVM "
                "lays out Metal scalars differently from what tilelang_core knows"
            )
        if mtype == UNION_NAME and name in reads and reads[name] != UNION_MEMBERS[arg.dtype][0]:
            raise LoweringError(
                f"{where}: kernel {kernel.name!r} reads {arg.dtype} scalar {name!r} as union member "
                f"{reads[name]!r}, expected {UNION_MEMBERS[arg.dtype][0]!r}"
            )
        size, align = _TYPE_LAYOUT[mtype]
        size *= count or 1
        offset = -(-offset // align) * align
        placed.append((offset, size))
        largest = max(largest, align)
        slots.append(ScalarSlot(arg=index, field=name, offset=offset, dtype=arg.dtype, size=size))
        offset += size
    total = -(-offset // largest) * largest
    for k, slot in enumerate(slots):  # a slot runs up to the next member (or the struct's end)
        end = placed[k + 1][0] if k + 1 < len(placed) else total
        slot.size = end - slot.offset
    return ScalarStruct(type_name=type_name, binding=binding, size=total, slots=slots)


def _expected_member(dtype: str) -> tuple[str, Optional[int]]:
    if dtype in UNION_MEMBERS:
        return UNION_NAME, None
    if dtype in PLAIN_MEMBERS:
        return PLAIN_MEMBERS[dtype]
    raise LoweringError(
        f"a Metal kernel cannot take a {dtype} scalar (supported: {', '.join([*PLAIN_MEMBERS, *UNION_MEMBERS])})"
    )


def _show(mtype: str, name: str, count: Optional[int]) -> str:
    return f"'{mtype} {name}{f'[{count}]' if count else ''}'"


def merged_union(items: list[str], where: str) -> str:
    """The union declaration with ``v_int[2]`` plus every member the kernels read."""
    known = {member: mtype for member, mtype in UNION_MEMBERS.values()}
    wanted: list[str] = []
    for item in items:
        for match in _UNION_READ.finditer(item):
            member = match.group("member")
            if member not in known:
                raise LoweringError(f"{where}: a Metal kernel reads unknown scalar union member {member!r}")
            if member not in wanted:
                wanted.append(member)
    lines = [f"union {UNION_NAME} {{", " int v_int[2];"]
    lines += [f" {known[m]} {m};" for m in wanted]
    return "\n".join(lines + ["};"])


def finish_source(source: str, kernels: list[DeviceKernel], where: str) -> tuple[str, list[DeviceKernel]]:
    """``(source, kernels)``: the merged, compilable Metal source, and the kernels with their
    :attr:`~tilelang_core.artifact.DeviceKernel.scalar_struct` layouts.

    :raises LoweringError: the source does not have the shape this module knows (a kernel or
        struct missing, members out of order or of unexpected types, an unknown union member).
    """
    items = split_items(source)
    head: list[str] = []
    rest: list[str] = []
    seen: set[str] = set()
    has_union = False
    for item in items:
        if _is_union(item):
            has_union = True
            continue
        if item in seen and not item.startswith("//"):
            continue
        seen.add(item)
        (head if item.startswith("#") or item.startswith("using ") else rest).append(item)
    body = [*head]
    if has_union:
        body.append(merged_union(items, where))
    body += rest
    merged = "\n\n".join(safe_member_names(body, kernels)) + "\n"
    merged_items = split_items(merged)
    finished = [replace(k, scalar_struct=scalar_struct(k, merged_items, where)) for k in kernels]
    return merged, finished
