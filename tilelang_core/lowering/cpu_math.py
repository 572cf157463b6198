"""TVM math functions its CPU code generators cannot print, rewritten before they run.

TVM 0.27 lowers its math intrinsics per target, and for the CPU targets some have no rule; a kernel
using one failed in code generation ("Unresolved call ... tirx.fabs", "unknown intrinsic"):

* target ``c``: ``tirx.fabs`` (so ``T.abs`` of a float), ``tirx.isinf`` and ``tirx.isfinite`` (TVM
  writes them with ``fabs``), ``tirx.exp2``, ``tirx.exp10``, ``tirx.fmod``, ``tirx.fma``
  (``T.fma``), ``tirx.popcount``, ``prim.clz``;
* target ``llvm``: ``tirx.fmod``;
* 16-bit floats (``float16``, ``bfloat16``): every math function on ``c``, and ``log1p``, the
  hyperbolic and inverse trigonometric functions, ``erf``, ``fmod``, ``atan2``, ``copysign``,
  ``hypot``, ``ldexp`` on ``llvm`` (``nextafter`` of them is stepped on their own bits before, for
  every target: :mod:`.narrow_float_math`; in float32 it rounded back to ``x`` itself).

:func:`lower_cpu_math` rewrites them, for both targets alike:

* a math function of 16-bit floats is computed in float32 and its result rounded back (as CPUs
  compute 16-bit math anyway), so it is as accurate as the float32 function;
* on ``c`` the C99 function: ``fabsf``/``fabs``, ``isinf``, ``isfinite``, ``exp2f``/``exp2``,
  ``fmodf``/``fmod``, ``fmaf``/``fma``; ``exp10(x)`` is ``pow(10, x)`` (C99 has no ``exp10``); ``popcount`` and
  ``clz`` are small helpers in the source over GCC/Clang's ``__builtin_popcount[ll]`` and
  ``__builtin_clz[ll]``, for every integer width;
* on ``llvm`` ``fmod``, ``fma``, ``tanh``, ``atanh``, ``sinh`` and ``cosh`` call the C library's
  ``fmodf``/``fmod`` & co. (TVM's ``fma`` was ``a * b + c``, rounded twice, where ``c`` and CUDA
  round once) (TVM's formulas of ``tanh`` and ``atanh`` lost every digit for small
  ``|x|``: ``tanh(1e-10)`` was 0 in float32 and float64, ``tanh(1e-5)`` 1.0014e-5; its ``sinh`` and
  ``cosh`` called the C library for scalars only, and stopped a ``T.vectorized`` loop with
  "unknown intrinsic"), ``exp10(x)`` is ``pow(10, x)``
  (TVM's is ``exp(x * ln 10)``, thousands of ulp off in float64), and ``clz`` takes 8- and 16-bit
  integers too;
* ``clz(0)`` is the integer's width on both (TVM's LLVM ``clz(0)`` is undefined; CUDA's
  ``__clz(0)`` is 32);
* on ``llvm`` a math function of vector values (``float64x2`` loads of ``T.Ramp`` indices,
  ``float16x2`` & co.) other than those LLVM computes per lane itself (:data:`LLVM_VECTOR_MATH`)
  is one scalar call per lane, put back together (:func:`_per_lane`). A C library function
  called with a vector gave lane 0 only: ``T.fmod``, ``T.tanh``, ``T.sinh``, ``T.cosh``,
  ``T.atanh`` and ``T.fma`` of a ``float64x2`` wrote 0 (or garbage) to lane 1, and ``T.atan2``,
  ``T.erf``, ``T.log1p``, the inverse trigonometric functions, ``T.copysign``, ``T.hypot``,
  ``T.nextafter``, ``T.ldexp`` and ``T.exp10`` of vectors stopped the lowering ("unknown
  intrinsic", "FloatImm can only take scalar").
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import tirx

from .atomics import checked_map
from .math_widening import computed_in_float32, dtype_of, element, has_half_operand, widened_clz, widened_unsigned
from .source_imports import c_definitions, with_import

__all__ = ["lower_cpu_math", "FLOAT_MATH"]

#: TVM's float math functions (op names) that are computed in float32 for 16-bit floats.
FLOAT_MATH = frozenset(
    f"tirx.{name}" for name in (
        "exp", "exp2", "exp10", "log", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh",
        "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf", "sigmoid", "floor",
        "round", "trunc", "nearbyint", "fabs", "isinf", "isfinite", "isnan", "pow", "fmod", "atan2",
        "copysign", "hypot", "ldexp", "fma",
    )
) | {"prim.log2", "prim.ceil"}


#: Math functions whose vector forms TVM's LLVM code generator computes right (LLVM intrinsics
#: such as ``llvm.exp.v2f64``, which LLVM computes lane by lane or with vector instructions).
LLVM_VECTOR_MATH = frozenset(
    f"tirx.{name}" for name in (
        "exp", "exp2", "log", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "sigmoid", "floor", "round",
        "trunc", "nearbyint", "fabs", "pow", "isnan",
    )
) | {"prim.log2", "prim.ceil"}


def _lane(value: Any, lane: int) -> Any:
    """Lane ``lane`` of ``value`` (a scalar is its own every lane)."""
    lanes = tvm.DataType(dtype_of(value)).lanes
    if lanes == 1:
        return value
    if isinstance(value, tirx.Broadcast):
        return value.value
    return tirx.Shuffle([value], [tirx.IntImm("int32", lane)])


def _per_lane(call: Any, lower: Callable[[Any], Any]) -> Any:
    """A math ``call`` of vectors as one scalar call per lane (each given to ``lower``), the
    results put back into a vector."""
    dtype = dtype_of(call)
    lanes = tvm.DataType(dtype).lanes
    scalars = [lower(tvm.ir.Call(call.op, [_lane(a, i) for a in call.args], ret_ty=element(dtype)))
               for i in range(lanes)]
    return tirx.Shuffle(scalars, [tirx.IntImm("int32", i) for i in range(lanes)])


def _libm(name: str) -> Callable[[Any], Any]:
    """``name``'s C library function: ``namef`` for float32, ``name`` for float64."""

    def lower(call: Any) -> Any:
        dtype = dtype_of(call)
        suffix = "f" if element(dtype) == "float32" else ""
        return tirx.call_pure_extern(dtype, f"{name}{suffix}", *call.args)

    return lower


def _classify(name: str) -> Callable[[Any], Any]:
    """C99's ``isinf`` / ``isfinite`` (macros that take float and double)."""

    def lower(call: Any) -> Any:
        return tirx.call_pure_extern(dtype_of(call), name, *call.args)

    return lower


def _exp10(call: Any) -> Any:
    (x,) = call.args
    return tirx.power(tirx.FloatImm(dtype_of(x), 10.0), x)


#: C helpers of ``popcount`` / ``clz`` (GCC/Clang builtins; ``clz(0)`` is the width), by name.
C_BIT_HELPERS = {
    "tl_popcount32": "static inline int32_t tl_popcount32(uint32_t x) { return __builtin_popcount(x); }\n",
    "tl_popcount64": "static inline int32_t tl_popcount64(uint64_t x) { return __builtin_popcountll(x); }\n",
    "tl_clz32": "static inline int32_t tl_clz32(uint32_t x) { return x ? __builtin_clz(x) : 32; }\n",
    "tl_clz64": "static inline int32_t tl_clz64(uint64_t x) { return x ? __builtin_clzll(x) : 64; }\n",
}


def _c_popcount(call: Any, helpers: set) -> Any:
    value, _, wide = widened_unsigned(call.args[0])
    helpers.add(f"tl_popcount{wide}")
    return tirx.Cast(dtype_of(call), tirx.call_extern("int32", f"tl_popcount{wide}", value))


def _c_clz(call: Any, helpers: set) -> Any:
    value, bits, wide = widened_unsigned(call.args[0])
    helpers.add(f"tl_clz{wide}")
    count = tirx.call_extern("int32", f"tl_clz{wide}", value)
    return tirx.Cast(dtype_of(call), count - tirx.IntImm("int32", wide - bits) if bits != wide else count)


def _llvm_clz(call: Any, helpers: set) -> Any:
    """TVM's clz of the value widened to 32/64 bits (the widths TVM takes), 0 giving the width
    (TVM's LLVM clz leaves ``clz(0)`` undefined)."""
    x = call.args[0]
    bits = tvm.DataType(dtype_of(x)).bits
    guarded = tirx.Select(x == tirx.IntImm(dtype_of(x), 0), tirx.IntImm("int32", bits), widened_clz(call))
    return tirx.Cast(dtype_of(call), guarded)


def _plain(rule: Callable[[Any], Any]) -> Callable[[Any, set], Any]:
    return lambda call, helpers: rule(call)


_C_RULES: dict[str, Callable[[Any, set], Any]] = {
    "tirx.fabs": _plain(_libm("fabs")),
    "tirx.exp2": _plain(_libm("exp2")),
    "tirx.fmod": _plain(_libm("fmod")),
    "tirx.fma": _plain(_libm("fma")),
    "tirx.exp10": _plain(_exp10),
    "tirx.isinf": _plain(_classify("isinf")),
    "tirx.isfinite": _plain(_classify("isfinite")),
    "tirx.popcount": _c_popcount,
    "prim.clz": _c_clz,
}
_LLVM_RULES: dict[str, Callable[[Any, set], Any]] = {
    "tirx.fmod": _plain(_libm("fmod")),
    "tirx.exp10": _plain(_exp10),  # TVM's LLVM exp10 is exp(x * ln 10): thousands of ulp off in float64
    # TVM's LLVM tanh is (1 - e^-2x) / (1 + e^-2x), its atanh 0.5 * log((1 + x) / (1 - x)): both
    # cancel for small |x| (tanh(1e-10) was 0, tanh(1e-5) 1.0014e-5 in float32)
    "tirx.tanh": _plain(_libm("tanh")),
    "tirx.atanh": _plain(_libm("atanh")),
    # TVM's LLVM rules of sinh/cosh call the C library for scalars only: in a T.vectorized loop
    # they stopped the lowering with "unknown intrinsic tirx.sinh" (every float dtype)
    "tirx.sinh": _plain(_libm("sinh")),
    # TVM's LLVM fma is a * b + c, rounded twice (3 * (1/3) - 1 in float32 gave 0, fmaf gives 2**-25)
    "tirx.fma": _plain(_libm("fma")),
    "tirx.cosh": _plain(_libm("cosh")),
    "prim.clz": _llvm_clz,
}


def lower_cpu_math(func: tirx.PrimFunc, language: str) -> tirx.PrimFunc:
    """Rewrite the math calls of ``func`` that TVM cannot lower for ``language`` (``"c"`` or ``"llvm"``)."""
    rules = _C_RULES if language == "c" else _LLVM_RULES
    changed = []
    helpers: set = set()

    def on_call(call: Any) -> Any:
        name = getattr(call.op, "name", None)
        if not isinstance(name, str):
            return call
        if (language == "llvm" and (name in FLOAT_MATH or name == "tirx.nextafter") and name not in LLVM_VECTOR_MATH
                and tvm.DataType(dtype_of(call)).lanes > 1):
            changed.append(name)
            return _per_lane(call, on_call)
        half = name in FLOAT_MATH and has_half_operand(call)
        rule = rules.get(name)
        if not half and rule is None:
            return call
        changed.append(name)
        target_rule = None if rule is None else (lambda c: rule(c, helpers))
        return computed_in_float32(call, target_rule) if half else target_rule(call)

    body = checked_map(func.body, [(tvm.ir.Call, on_call)])
    if helpers:
        text = c_definitions("\n/* tilelang bit counts (GCC/Clang builtins) */\n#include <stdint.h>\n",
                             (C_BIT_HELPERS[h] for h in sorted(helpers)))
        body = with_import(body, "pragma_import_c", text)
    return func.with_body(body) if changed else func
