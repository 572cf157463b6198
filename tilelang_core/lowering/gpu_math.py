"""TVM math calls its CUDA and Metal code generators cannot print, rewritten before they run.

TVM 0.27 lowers its math intrinsics per target, and for the GPU targets some have no rule for
some dtypes; a kernel using one failed to lower ("Unresolved call tirx.log1p"), failed in the
device compiler (CUDA ``sinh``/``cosh``/``nearbyint``/``fmod`` of 16-bit floats print functions
CUDA does not have, such as ``hsinh``), or stopped on a bare TVM check failure:

* **bit counts:** TVM's CUDA rules count only uint32/uint64 (``popcount``) and 32/64-bit values
  (``clz``), and its Metal rule ``clz`` of 32/64-bit values only. Here every integer width works:
  the count is taken of the value zero-extended to 32 or 64 bits
  (:func:`~.math_widening.widened_unsigned`); ``clz`` of an 8- or 16-bit value is the 32-bit
  count minus the extra bits, so ``clz(0)`` is the value's width, as on the CPU targets and as
  CUDA's ``__clz(0)`` is 32.
* **``T.fma``** on CUDA: TVM has no rule for any dtype ("Unresolved call tirx.fma"); float32 and
  float64 are CUDA's ``fmaf``/``fma``, float16/bfloat16 computed in float32 as below (the CPU
  targets compute it the same way, :mod:`.cpu_math`).
* **16-bit float math:** the functions TVM has no CUDA rule for (float16 and bfloat16), and on
  Metal those of the next point, are computed in float32 and rounded back
  (:func:`~.math_widening.computed_in_float32`), as accurate as the float32 function.
  The functions TVM does lower for 16-bit floats (``hexp``, ``hsqrt``, ...) are left to it.

* **Metal function names:** TVM's Metal generator prints the C library's names for ``tan``,
  ``asin``, ``acos``, ``atan``, ``asinh``, ``acosh``, ``atanh``, ``atan2``, ``copysign``, ``ldexp``
  (``tanf``, ``atan2f``, ... in float32 kernels too), ``nearbyint``, ``log1p`` and ``hypot``, which
  the Metal Shading Language does not have ("use of undeclared identifier"): a kernel using one
  lowered, then failed in Metal's compiler on the Mac. Here they are MSL's overloaded functions,
  ``nearbyint`` is MSL's ``rint`` (round half to even, the same), and ``log1p``/``hypot``, which
  MSL lacks, are small helpers defined once in the source (:data:`METAL_HELPERS`). ``T.fma``,
  which TVM's Metal generator did not lower at all ("Unresolved call tirx.fma"), is MSL's ``fma``.
* **Metal float remainder:** TVM's Metal generator prints a float ``tirx.Mod`` (``T.truncmod``, and
  so ``%``, ``//``, ``T.floormod`` and ``T.floordiv`` of floats, which language/float_modulo.py
  builds from it) as C's ``fmodf``, which MSL does not have: every such kernel lowered, then
  failed in Metal's compiler. Here it is MSL's overloaded ``fmod`` (:func:`_metal_fmod`), float16
  and bfloat16 computed in float32 and rounded back as the functions above (``fmod`` is exact, so
  this is the correctly rounded remainder). ``T.fmod`` was already MSL's ``fmod``.

:func:`GpuMathPass` runs in the GPU pipeline right after the fragment layout. The CPU targets'
rules are in :mod:`.cpu_math`.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import (HALF, computed_in_float32, dtype_of, element, has_half_operand, is_float, widened_clz,
                             widened_unsigned)
from .source_imports import with_import_in_first_kernel

__all__ = ["HALF_WITHOUT_RULE", "METAL_HELPERS", "METAL_NAMES", "lower_gpu_math", "GpuMathPass"]

_WIDE_UNSIGNED = ("uint32", "uint64")

#: TVM op name -> the Metal Shading Language function (overloaded for half and float) it prints as.
METAL_NAMES = {
    **{f"tirx.{n}": n for n in ("tan", "asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2", "copysign", "ldexp", "fma")},
    "tirx.nearbyint": "rint",
}

#: Helpers for the functions MSL lacks, by TVM op name: (helper name, definition). float only:
#: 16-bit operands are computed in float32 first (:data:`HALF_WITHOUT_RULE`).
METAL_HELPERS = {
    # Goldberg's log1p: log(u) * x / (u - 1) with u = 1 + x corrects u's rounding error
    "tirx.log1p": ("tl_log1p", "static inline float tl_log1p(float x) {\n"
                   "  float u = 1.0f + x;\n"
                   "  return (u == 1.0f || isinf(u)) ? (u == 1.0f ? x : u) : log(u) * (x / (u - 1.0f));\n}\n"),
    # hypot without overflow or underflow: scaled by the larger magnitude; inf wins over nan
    "tirx.hypot": ("tl_hypot", "static inline float tl_hypot(float x, float y) {\n"
                   "  float a = fabs(x), b = fabs(y);\n"
                   "  if (isinf(a) || isinf(b)) return INFINITY;\n"
                   "  if (isnan(a) || isnan(b)) return a + b;\n"
                   "  float m = a > b ? a : b, n = a > b ? b : a;\n"
                   "  if (m == 0.0f) return 0.0f;\n"
                   "  float r = n / m;\n"
                   "  return m * sqrt(1.0f + r * r);\n}\n"),
}


#: Per target kind: the math functions (op names) computed in float32 for float16 and bfloat16
#: operands: on CUDA those TVM 0.27 has no rule for; on Metal those written with MSL's names or
#: helpers above (TVM had no float16 rule for most of them, and its bfloat16 path prints C names).
HALF_WITHOUT_RULE: dict[str, frozenset] = {
    "cuda": frozenset(f"tirx.{n}" for n in (
        "log1p", "sinh", "cosh", "asin", "acos", "asinh", "acosh", "atanh", "nearbyint", "fmod", "atan2",
        "copysign", "hypot", "ldexp", "fma",
    )),
    "metal": frozenset(METAL_NAMES) | frozenset(METAL_HELPERS),
}


def _popcount(call: Any) -> Any:
    if dtype_of(call.args[0]) in _WIDE_UNSIGNED:
        return call
    value, _, _ = widened_unsigned(call.args[0])
    return tirx.Cast(dtype_of(call), tvm.ir.Call(call.op, [value], ret_ty=dtype_of(value)))


def _clz(call: Any) -> Any:
    if tvm.DataType(dtype_of(call.args[0])).bits in (32, 64):
        return call
    return tirx.Cast(dtype_of(call), widened_clz(call))


_BIT_COUNTS = {"tirx.popcount": _popcount, "prim.clz": _clz}


def _cuda_fma(call: Any) -> Any:
    """``T.fma`` of float32/float64 as CUDA's ``fmaf``/``fma`` (one rounding; TVM had no CUDA rule:
    "Unresolved call tirx.fma"); other dtypes are left to TVM."""
    dtype = dtype_of(call)
    names = {"float32": "fmaf", "float64": "fma"}
    if dtype not in names:
        return call
    return tirx.call_pure_extern(dtype, names[dtype], *call.args)


def _metal_function(call: Any, helpers: dict) -> Any:
    """``call`` as MSL's function or one of :data:`METAL_HELPERS` (None: TVM's own rule applies)."""
    name = call.op.name
    if name in METAL_NAMES:
        return tirx.call_pure_extern(dtype_of(call), METAL_NAMES[name], *call.args)
    if name in METAL_HELPERS and element(dtype_of(call)) == "float32":
        helper, text = METAL_HELPERS[name]
        helpers[helper] = text
        return tirx.call_pure_extern(dtype_of(call), helper, *call.args)
    return None


def _metal_fmod(mod: Any) -> Any:
    """A float ``tirx.Mod`` (truncated remainder) as MSL's ``fmod``, 16-bit floats in float32;
    TVM printed C's ``fmodf``. Integer and vector remainders are left to TVM."""
    dtype = dtype_of(mod)
    if "x" in dtype or not is_float(dtype):
        return mod
    if dtype not in HALF:
        return tirx.call_pure_extern(dtype, "fmod", mod.a, mod.b)
    wide = [tirx.Cast("float32", x) for x in (mod.a, mod.b)]
    return tirx.Cast(dtype, tirx.call_pure_extern("float32", "fmod", *wide))


def lower_gpu_math(body: Any, kind: Optional[str] = None) -> Any:
    """``body`` (a GPU kernel's, for target kind ``kind``) with the calls above rewritten."""
    functions = HALF_WITHOUT_RULE.get(kind or "", frozenset())
    helpers: dict = {}

    def metal_rule(call: Any) -> Any:
        metal = _metal_function(call, helpers) if "x" not in dtype_of(call) else None
        return call if metal is None else metal

    def on_call(call: Any) -> Any:
        name = getattr(call.op, "name", None)
        if not isinstance(name, str):
            return call
        rule = _BIT_COUNTS.get(name)
        if rule is not None:
            return call if "x" in dtype_of(call) else rule(call)  # vector lanes: left to TVM
        if name not in functions:
            return call
        rule = metal_rule if kind == "metal" else None
        if kind == "cuda" and name == "tirx.fma":
            rule = _cuda_fma
        if has_half_operand(call):
            return computed_in_float32(call, rule)
        return call if rule is None else rule(call)

    rules = [(tvm.ir.Call, on_call)]
    if kind == "metal":
        rules.append((tirx.Mod, _metal_fmod))
    body = checked_map(body, rules)
    if helpers:
        body, _ = with_import_in_first_kernel(body, "".join(helpers[h] for h in sorted(helpers)))
    return body


def GpuMathPass() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """:func:`lower_gpu_math` on every PrimFunc of a GPU module (for the function's target kind)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        target = func.attrs.get("target") if func.attrs is not None else None
        body = lower_gpu_math(func.body, target.kind.name if target is not None else None)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.GpuMath")
