"""Lowering of ``T.cast(value, dtype, round=..., sat=..., rbits=...)`` with a non-default rounding.

``T.cast`` with the default conversion (``round=""``/``"rn"``, ``sat=True``) is TVM's cast and
never reaches this module. Any other rounding is left by the language as a marker call
(:data:`~tilelang_core.language.tir.ir.ROUNDED_CAST`); :func:`lower_rounded_casts` replaces
each marker with the target's conversion, or refuses the kernel:

* ``round="rs"`` (stochastic rounding: ``rbits`` are random bits added below the kept mantissa
  bits before truncation) from float32 to ``float16``, ``bfloat16``, ``float8_e4m3fn``,
  ``float8_e5m2`` and ``float4_e2m1fn``, with ``sat=True``: CUDA targets with the
  family-specific features of sm_100a (``sm_100a``, ``sm_101a``, ``sm_103a``, ``sm_110a``,
  and their ``f`` forms), through PTX's ``cvt.rs.satfinite`` in a device helper
  ``__tl_cvt_f32x1_to_<type>x1_rs_sat(x, rbits)``. Other CUDA architectures:
  :class:`~tilelang_core.errors.TargetFeatureError` ("Stochastic rounding f32-to-FP16 requires
  sm_100a").
* ``round="rz"/"rm"/"rp"`` (toward zero, down, up) to ``float16`` or ``bfloat16``: CUDA's
  ``__float2half_rz/_rd/_ru`` and ``__float2bfloat16_rz/_rd/_ru``.
* ``round="rn", sat=False`` to a 16-, 32- or 64-bit float: TVM's cast, which already overflows
  to infinity instead of saturating.
* anything else, and every non-default rounding on CPU targets: a
  :class:`~tilelang_core.errors.LoweringError` at the ``T.cast`` line naming what is lowered
  where.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError, TargetFeatureError
from .markers import marker_call_args

#: dtype -> (suffix of the helper name, PTX conversion type, name in messages).
_RS_TYPES = {
    "float16": ("f16", "f16x2", "FP16"),
    "bfloat16": ("bf16", "bf16x2", "BF16"),
    "float8_e4m3fn": ("e4m3", "e4m3x4", "FP8"),
    "float8_e5m2": ("e5m2", "e5m2x4", "FP8"),
    "float4_e2m1fn": ("e2m1", "e2m1x4", "FP4"),
}

#: CUDA architectures whose family-specific features include ``cvt.rs``.
_RS_ARCHS = ("sm_100a", "sm_100f", "sm_101a", "sm_101f", "sm_103a", "sm_103f", "sm_110a", "sm_110f")

_DIRECTED = {"rz": "rz", "rm": "rd", "rp": "ru"}
_DIRECTED_FUNCS = {"float16": "__float2half_{}", "bfloat16": "__float2bfloat16_{}"}


def _helper_source(dtype: str) -> tuple[str, str]:
    """(name, CUDA source) of the one-element stochastic-rounding helper for ``dtype``.

    The PTX instruction converts two (16-bit results) or four (8- and 4-bit results) floats at
    once; the helper gives ``x`` in every slot and keeps the lowest result, so the slot order of
    the packed result does not matter.
    """
    short, ptx, _ = _RS_TYPES[dtype]
    name = f"__tl_cvt_f32x1_to_{short}x1_rs_sat"
    if dtype in ("float16", "bfloat16"):
        ctype, from_bits = ("half", "__ushort_as_half") if dtype == "float16" else ("nv_bfloat16", "__ushort_as_bfloat16")
        body = (
            f"__device__ __forceinline__ {ctype} {name}(float x, unsigned int rbits) {{\n"
            "  unsigned int packed;\n"
            f'  asm("cvt.rs.satfinite.{ptx}.f32 %0, %1, %2, %3;" : "=r"(packed) : "f"(x), "f"(x), "r"(rbits));\n'
            f"  return {from_bits}((unsigned short)(packed & 0xFFFFu));\n"
            "}\n"
        )
    elif dtype.startswith("float8"):
        ctype = "__nv_fp8_e4m3" if dtype == "float8_e4m3fn" else "__nv_fp8_e5m2"
        body = (
            f"__device__ __forceinline__ {ctype} {name}(float x, unsigned int rbits) {{\n"
            "  unsigned int packed;\n"
            f'  asm("cvt.rs.satfinite.{ptx}.f32 %0, {{%1, %2, %3, %4}}, %5;" : "=r"(packed)\n'
            '      : "f"(x), "f"(x), "f"(x), "f"(x), "r"(rbits));\n'
            f"  {ctype} out;\n"
            "  out.__x = (__nv_fp8_storage_t)(packed & 0xFFu);\n"
            "  return out;\n"
            "}\n"
        )
    else:
        body = (
            f"__device__ __forceinline__ __nv_fp4_e2m1 {name}(float x, unsigned int rbits) {{\n"
            "  unsigned short packed;\n"
            f'  asm("cvt.rs.satfinite.{ptx}.f32 %0, {{%1, %2, %3, %4}}, %5;" : "=h"(packed)\n'
            '      : "f"(x), "f"(x), "f"(x), "f"(x), "r"(rbits));\n'
            "  __nv_fp4_e2m1 out;\n"
            "  out.__x = (__nv_fp4_storage_t)(packed & 0xFu);\n"
            "  return out;\n"
            "}\n"
        )
    return name, body


def _directed_helper_source(dtype: str, suffix: str) -> tuple[str, str]:
    """(name, CUDA source) of the helper rounding a float to ``dtype`` toward zero/down/up (``suffix``
    ``rz``/``rd``/``ru``) and giving the result back as a float.

    The source includes the header that declares ``__float2half_*``/``__float2bfloat16_*`` itself:
    below sm_80 TVM stores bfloat16 as ``ushort`` and its preamble no longer includes cuda_bf16.h, so
    ``__float2bfloat16_rz`` was undefined there (nvcc and NVRTC). Returning a float (exactly the
    rounded value) keeps the call out of TVM's bfloat16 legalization below sm_80.
    """
    short, header, to_float = ("f16", "cuda_fp16.h", "__half2float") if dtype == "float16" else (
        "bf16", "cuda_bf16.h", "__bfloat162float")
    name = f"__tl_cvt_f32_to_{short}_{suffix}"
    guard = f"TL_CVT_F32_TO_{short.upper()}_{suffix.upper()}"
    body = (
        f"#include <{header}>\n"
        f"#ifndef {guard}\n#define {guard}\n"
        f"__device__ __forceinline__ float {name}(float x) {{ return {to_float}({_DIRECTED_FUNCS[dtype].format(suffix)}(x)); }}\n"
        "#endif\n"
    )
    return name, body


def _marker(call: Any) -> Any:
    """``(value, dtype, mode, sat, rbits, loc)`` of a rounded-cast marker call, else None."""
    from ..language.tir.ir import ROUNDED_CAST

    args = marker_call_args(call, ROUNDED_CAST)
    if args is None:
        return None
    value, mode, sat, loc, *rest = args
    return value, str(call.ty.dtype), str(mode.value), bool(sat), (rest[0] if rest else None), str(loc.value)


def _lower_one(value: Any, dtype: str, mode: str, sat: bool, rbits: Any, loc: str, kind: str, arch: str) -> Any:
    what = f"{loc}: T.cast(..., {dtype!r}, round={mode!r}{', sat=False' if not sat else ''})"
    if mode == "rn" and not sat and dtype in ("float16", "bfloat16", "float32", "float64"):
        return tirx.Cast(dtype, value)  # TVM's conversion to these types does not saturate
    if kind != "cuda":
        raise LoweringError(
            f"{what}: this rounding is lowered only for CUDA targets (round='rs' for sm_100a; round='rz'/'rm'/'rp' "
            f"to float16/bfloat16); the target is {kind}. Use the default T.cast(value, dtype) here"
        )
    source = value if str(value.ty.dtype) == "float32" else tirx.Cast("float32", value)
    if mode == "rs":
        if dtype not in _RS_TYPES:
            raise LoweringError(f"{what}: stochastic rounding converts to one of {sorted(_RS_TYPES)}, not {dtype!r}")
        label = _RS_TYPES[dtype][2]
        if not sat:
            raise LoweringError(f"{what}: sat=false is not supported with round='rs' (PTX has only cvt.rs.satfinite)")
        if arch not in _RS_ARCHS:
            raise TargetFeatureError(
                f"{what}: Stochastic rounding f32-to-{label} requires sm_100a (or another architecture with its "
                f"family-specific features: {', '.join(_RS_ARCHS)}); the target is {arch or 'cuda without -arch'}"
            )
        from tvm.backend.cuda.op import cuda_func_call

        name, code = _helper_source(dtype)
        bits = rbits if str(rbits.ty.dtype) == "uint32" else tirx.Cast("uint32", rbits)
        return cuda_func_call(name, source, bits, source_code=code, return_type=dtype)
    if mode in _DIRECTED and dtype in _DIRECTED_FUNCS and sat:
        from tvm.backend.cuda.op import cuda_func_call

        name, code = _directed_helper_source(dtype, _DIRECTED[mode])
        # the helper gives the rounded value as a float (exact), so TVM's conversion back is exact too
        return tirx.Cast(dtype, cuda_func_call(name, source, source_code=code, return_type="float32"))
    raise LoweringError(
        f"{what}: not lowered for CUDA; provided are round='rs' (sat=True) to {sorted(_RS_TYPES)} on sm_100a, "
        "round='rz'/'rm'/'rp' to float16/bfloat16, and round='rn' with sat=False to 16/32/64-bit floats"
    )


def lower_rounded_casts(func: tirx.PrimFunc, kind: str, arch: str) -> tirx.PrimFunc:
    """``func`` with each rounded-cast marker replaced by the conversion of target ``kind``/``arch``.

    :raises LoweringError: a rounding the target has no conversion for (at the ``T.cast`` line).
    :raises TargetFeatureError: stochastic rounding on a CUDA architecture without ``cvt.rs``.
    """
    found: list = []

    def probe(call: Any) -> Any:
        if not found and _marker(call) is not None:
            found.append(call)
        return call

    tvm_ffi.structural_map(func.body, [(tvm.ir.Call, probe)])
    if not found:
        return func

    errors: list = []

    def on_call(call: Any) -> Any:
        marker = _marker(call)
        if marker is None or errors:
            return call
        try:
            return _lower_one(*marker, kind=kind, arch=arch)
        except LoweringError as exc:  # raised below: an exception inside the FFI walk loses its type
            errors.append(exc)
            return call

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.Call, on_call)])
    if errors:
        raise errors[0]
    return func.with_body(body)
