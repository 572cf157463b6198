"""Float types narrower than 16 bits on CPU, Metal and OpenCL targets, and integer types narrower than 8
bits on every target: a clear refusal before code generation.

TVM 0.27's C code generator has no C type for ``float8_*`` / ``float6_*`` / ``float4_*`` values
("Cannot convert type float8_e4m3fn to C type") and its LLVM one stops at an internal check, so
a CPU kernel using them is refused here, naming the tensor, buffer or expression that holds one
and saying what to do instead.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm_ffi
from tvm import tirx

from ..errors import TargetFeatureError
from .markers import marker_call_args
from .target import NARROW_FLOAT_EMULATED_KINDS

__all__ = ["NARROW_FLOAT_EMULATED_KINDS", "first_use", "refuse_narrow_floats", "refuse_sub_byte_integers"]


_NARROW = ("float8_", "float6_", "float4_")  # float8_e4m3fn, float6_e2m3fn, float4_e2m1fn, ... (not float64)


def _narrow(dtype: Any) -> bool:
    return str(dtype).startswith(_NARROW)


def first_use(func: tirx.PrimFunc, matches: Callable[[Any], bool] = _narrow) -> Optional[tuple[str, str]]:
    """``(dtype, what)`` of the first tensor parameter, scalar parameter, buffer or conversion of
    ``func`` whose dtype passes ``matches`` (default: a float narrower than 16 bits), else None."""
    for param in func.params:
        buf = func.buffer_map.get(param)
        if buf is not None and matches(buf.ty.dtype):
            return str(buf.ty.dtype), f"tensor parameter '{buf}'"
        if buf is None and matches(getattr(param.ty, "dtype", "")):
            return str(param.ty.dtype), f"scalar parameter '{param}'"
    found: list = []

    def visit(node: Any) -> None:
        if found:
            return
        if isinstance(node, tirx.AllocBuffer) and matches(node.buffer.ty.dtype):
            found.append((str(node.buffer.ty.dtype), f"buffer '{node.buffer}'"))
        elif isinstance(node, tirx.Cast) and matches(node.ty.dtype):
            found.append((str(node.ty.dtype), f"the conversion {node}"))

    tvm_ffi.structural_walk(func.body, ((tirx.AllocBuffer, tirx.Cast), visit), order="pre")
    return found[0] if found else None


def _sub_byte_integer(dtype: Any) -> bool:
    """``int4``, ``uint2``, ... : an integer type of 1 to 7 bits (``bool`` is not one)."""
    text = str(dtype)
    digits = text[4:] if text.startswith("uint") else text[3:] if text.startswith("int") else ""
    return digits.isdigit() and 0 < int(digits) < 8


def refuse_sub_byte_integers(func: tirx.PrimFunc, kind: str, location: str, name: str) -> None:
    """Raise for an integer type narrower than 8 bits (``int4``, ``uint2``) on any target.

    TVM's C code generator has no C type for one ("Cannot convert type int4 to C type", without a
    line); its LLVM one builds a kernel that takes a tensor type torch does not have, so it could
    never be called; its CUDA one reads an element as the whole 32-bit word it is packed in (a
    silently wrong value). Packed values are taken as bytes and unpacked in the kernel instead.

    :raises TargetFeatureError: naming the first tensor, buffer or conversion of such a type.
    """
    use = first_use(func, _sub_byte_integer)
    if use is None:
        return
    dtype, what = use
    why = {"c": "TVM's C code generator has no type for it", "llvm": "torch has no tensor type to pass for it",
           "cuda": "TVM's CUDA code generator reads such an element as the whole 32-bit word it is packed in"}
    raise TargetFeatureError(
        f"{location}: kernel '{name}' uses {dtype} ({what}), which the {kind} target does not provide "
        f"({why.get(kind, 'this pipeline has no lowering for integers narrower than 8 bits')}). Take the packed "
        f"values as an int8 (or uint8) tensor and unpack them in the kernel: ((A[i, j // 2] >> (4 * (j % 2))) & 0xF) "
        f"for two unsigned 4-bit values per byte"
    )


def _prints_narrow(func: tirx.PrimFunc) -> bool:
    """Whether a ``T.print`` of the kernel prints a narrow float value."""
    from ..language.tileops.debug_print import PRINT_CALL

    found: list = []

    def visit(node: Any) -> None:
        args = marker_call_args(node, PRINT_CALL)
        if args is not None and any(_narrow(getattr(getattr(a, "ty", None), "dtype", "")) for a in args):
            found.append(node)

    tvm_ffi.structural_walk(func.body, ((tirx.Call,), visit), order="pre")
    return bool(found)


def refuse_narrow_floats(func: tirx.PrimFunc, kind: str, location: str, name: str) -> None:
    """Raise when ``func``, lowered for ``kind`` (a CPU target or one of
    :data:`NARROW_FLOAT_EMULATED_KINDS`), uses a float type narrower than 16 bits.

    CPU targets have no such types at all. Metal and OpenCL have none either, and TVM emulates
    float8 there with integer bit tricks that ignore zero, subnormals, NaN and overflow (the
    float8_e4m3fn byte 0x00 reads as 0.0078125): a silently wrong kernel, refused instead. CUDA
    has its own handling (lowering/float8_cuda.py).

    :raises TargetFeatureError: naming the first tensor, buffer or conversion of such a type.
    """
    if _prints_narrow(func):
        return  # the T.print lowering refuses it, at the T.print's own line (lowering/debug_print.py)
    use = first_use(func)
    if use is None:
        return
    dtype, what = use
    if kind in ("c", "llvm"):
        why = "which CPU targets (c, llvm) cannot compile: TVM's C and LLVM code generators have no 8-, 6- or 4-bit float types"
    else:
        why = (f"which the {kind} target cannot compute correctly: it has no 8-, 6- or 4-bit float types, and TVM's "
               "emulation of them gets zero, subnormals and NaN wrong")
    raise TargetFeatureError(
        f"{location}: kernel '{name}' uses {dtype} ({what}), {why}. Convert such tensors to "
        "float16, bfloat16 or float32 before the kernel (x.to(torch.float16)), or lower the kernel for cuda"
    )
