"""Casts and reinterpretations of constants, folded before TVM's simplifier and code generators see them.

TVM 0.27 folds a cast of a constant by making a constant of the new type from the *same* value,
and refuses values outside that type: ``T.cast(T.int16(-5), "uint32")`` stopped lowering with
"cannot make uint from negative value -5", ``T.cast(T.uint16(65535), "uint8")`` with "Literal
value 65535 exceeds maximum of uint8", on every target. A conversion between integer types keeps
the value modulo ``2**bits`` of the new type (two's complement for signed types), which is what C,
CUDA and LLVM do and what such a cast means in a kernel (masks, hash constants, wrapped offsets).
:func:`fold_constant_casts` replaces each cast of an integer constant to an integer type by the
constant that conversion gives, innermost first, at the start of lowering. A cast of a number
constant to ``bool`` is whether it is nonzero (a NaN too), as C, CUDA, LLVM and torch convert:
TVM truncated a float first, so ``T.Cast("bool", T.float32(0.5))`` was false (0.5, -0.1 and 1e-30
folded to false, 2.0 stopped lowering with a check failure, NaN with "Cannot convert"; a
differential fuzz pass found it). Casts of non-constant values, and to or from other types, are
left to the pipeline.

``T.reinterpret`` of a constant failed to compile on target ``c``: TVM's C code generator takes
the constant's address (``*(uint32_t *)(&(2.000000e+00f))``, "lvalue required"). Such a
reinterpretation between an integer and a float type of the same width is folded into the constant
with those bits (a NaN other than the one C's ``NAN`` is, whose payload a float constant cannot
carry through TVM's printer, is left as it is).
"""

from __future__ import annotations

import math
import struct
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from .atomics import checked_map

__all__ = ["FoldConstantReinterprets", "fold_constant_cast", "fold_constant_casts", "wrapped"]


def wrapped(value: int, dtype: str) -> int:
    """``value`` converted to the integer dtype ``dtype`` (``int8`` ... ``uint64``): reduced modulo
    ``2**bits``, then read as two's complement for signed types."""
    t = tvm.DataType(dtype)
    bits = t.bits
    value &= (1 << bits) - 1
    if t.type_code == tvm.DataTypeCode.INT and value >> (bits - 1):
        value -= 1 << bits
    return value


def _is_int(dtype: str) -> bool:
    t = tvm.DataType(dtype)
    return t.lanes == 1 and t.bits > 1 and t.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT)


def fold_constant_cast(cast: Any) -> Any:
    """``cast`` folded into a constant where it converts an integer constant to an integer type
    (wrapping around, :func:`wrapped`) or a number constant to ``bool``; else ``cast`` itself."""
    value = cast.value
    target = str(cast.ty.dtype)
    if target == "bool" and isinstance(value, (tirx.IntImm, tirx.FloatImm)):
        return tirx.IntImm("bool", bool(value.value != 0))  # NaN != 0: true, as C and torch convert
    if not isinstance(value, tirx.IntImm) or not _is_int(target) or not _is_int(str(value.ty.dtype)):
        return cast
    return tirx.IntImm(target, wrapped(int(value.value), target))


_FLOAT_BITS = {"float16": ("<e", "<H"), "bfloat16": None, "float32": ("<f", "<I"), "float64": ("<d", "<Q")}


def _float_of_bits(bits: int, dtype: str) -> float:
    if dtype == "bfloat16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    float_fmt, int_fmt = _FLOAT_BITS[dtype]
    return struct.unpack(float_fmt, struct.pack(int_fmt, bits))[0]


def _bits_of_float(value: float, dtype: str) -> int:
    if dtype == "bfloat16":  # a bfloat16 constant holds a value bfloat16 represents exactly
        return struct.unpack("<I", struct.pack("<f", value))[0] >> 16
    float_fmt, int_fmt = _FLOAT_BITS[dtype]
    return struct.unpack(int_fmt, struct.pack(float_fmt, value))[0]


def _on_reinterpret(call: Any) -> Any:
    if getattr(call.op, "name", "") != "tirx.reinterpret" or len(call.args) != 1:
        return call
    if not isinstance(call.ty, tvm.ir.PrimType):  # an address as a pointer (T.make_tensor): nothing to fold
        return call
    value, target = call.args[0], str(call.ty.dtype)
    source = str(value.ty.dtype)
    if tvm.DataType(source).bits != tvm.DataType(target).bits:
        return call
    if isinstance(value, tirx.IntImm) and target in _FLOAT_BITS and _is_int(source):
        bits = wrapped(int(value.value), "uint" + str(tvm.DataType(source).bits))
        result = _float_of_bits(bits, target)
        if math.isnan(result) and bits != _bits_of_float(float("nan"), target):
            return call  # a NaN with a payload of its own
        return tirx.FloatImm(target, result)
    if isinstance(value, tirx.FloatImm) and source in _FLOAT_BITS and _is_int(target):
        return tirx.IntImm(target, wrapped(_bits_of_float(float(value.value), source), target))
    return call


def fold_constant_casts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every integer-to-integer cast of an integer constant, and every reinterpretation
    of a constant between an integer and a float type, folded (see module doc)."""
    body = checked_map(func.body, [(tirx.Cast, fold_constant_cast), (tvm.ir.Call, _on_reinterpret)])
    return func if body.same_as(func.body) else func.with_body(body)


def _is_reinterpret(node: Any) -> bool:
    return isinstance(node, tvm.ir.Call) and getattr(node.op, "name", "") == "tirx.reinterpret"


def _round_trip_insides(body: Any) -> list:
    """The inner calls of ``reinterpret(T, reinterpret(bits, c))`` with ``c`` a constant of type
    ``T``: float_identities.py's barriers, which hide a constant (the zero of ``x * 0.0``) from the
    simplifier until code generation and must not be folded."""
    found: list = []

    def visit(node: Any) -> None:
        if _is_reinterpret(node) and len(node.args) == 1 and _is_reinterpret(node.args[0]):
            inner = node.args[0]
            if inner.args and str(getattr(inner.args[0].ty, "dtype", "")) == str(getattr(node.ty, "dtype", "")):
                found.append(inner)

    tvm_ffi.structural_walk(body, ((tvm.ir.Call,), visit), order="pre")
    return found


def _fold_reinterprets(func: tirx.PrimFunc, _mod: Any = None, _ctx: Any = None) -> tirx.PrimFunc:
    keep = _round_trip_insides(func.body)

    def on_call(call: Any) -> Any:
        return call if any(call.same_as(k) for k in keep) else _on_reinterpret(call)

    body = checked_map(func.body, [(tvm.ir.Call, on_call)])
    return func if body.same_as(func.body) else func.with_body(body)


def FoldConstantReinterprets() -> tvm.transform.Pass:  # noqa: N802 - a pass, named like TVM's
    """The reinterpretations of constants that TVM's ``BF16StorageLegalize`` makes, folded (a pass
    that runs right after it).

    A store of a bfloat16 constant (``T.clear(O[0:8])``, ``O[i] = T.bfloat16(0)`` into a bfloat16
    tensor) becomes the rounding of the float32 constant's bits, ``reinterpret(uint32, 0.0f)``, and
    TVM's C code generator prints that as ``*(uint32_t *)(&(0.000000e+00f))``: the kernel did not
    compile on target ``c`` ("lvalue required as unary '&' operand"). The bit round trips of
    float_identities.py (``x * 0.0`` keeps its zero hidden from the simplifier) are left alone.
    """
    return tirx.transform.prim_func_pass(_fold_reinterprets, opt_level=0, name="tl.FoldConstantReinterprets")
