"""float8 on CUDA: CUDA's own types and conversions on every architecture, arithmetic in float32.

TVM 0.27 keeps ``float8_*`` values as CUDA's ``__nv_fp8_*`` types (cuda_fp8.h) from sm_89 on.
Below sm_89 its ``FP8ComputeLegalize``/``FP8StorageLegalize`` turned every float8 value into a
byte and every conversion into integer bit arithmetic that knows no zero, subnormal, NaN or
overflow: on plain ``target="cuda"`` (sm_80) the float8_e4m3fn byte ``0x00`` read as 0.0078125,
``0x7f`` (NaN) as 480, every subnormal wrongly, and an encode neither saturated nor rounded
subnormals. Its CUDA prelude also includes cuda_fp8.h only for ``__CUDA_ARCH__ >= 890``, so the
native types could not simply be kept there.

Here every CUDA architecture takes the native path, so sm_80 gives bit for bit what sm_90 gives:

* :func:`Float8ComputeLegalize` (in place of TVM's ``FP8ComputeLegalize``) leaves float8
  storage, loads, stores and conversions to ``__nv_fp8_*``, whose conversions (cuda_fp8.hpp)
  run in hardware from sm_89 and in software, with the same results, below: to float8 round to
  nearest even, saturate to the largest finite value (``__NV_SATFINITE``: an infinity too), keep
  signed zeros and subnormals, and make NaN the canonical NaN ``0x7f``; from float8 they are
  exact (``float8_e8m0fnu`` rounds up to a power of two, saturates to 2**127, NaN ``0xff``).
  What has no ``__nv_fp8_*`` operator is computed in float32 and rounded back to float8 after
  every operation: ``+ - * /``, ``%``, floor division, ``min``/``max``, comparisons, math
  functions (``T.exp`` and the like), a conversion between two float8 formats and one from a
  float8 vector to a bfloat16 vector (both exact in float32, then one rounding), and a vector
  conversion between float8 and integers, bool or (from float8) float64, which cuda_fp8.h does
  not have (integers go through float32, as its scalar conversions do). TVM did not
  legalize any of these from sm_89 on, so a float8 ``A + A`` did not compile there ("no operator
  "+" matches these operands"). float8 conversions of more than 4 lanes (a ``T.vectorized(8)``
  loop is split into 4 lanes before, lowering/vector_lanes.py; vector values written out remain)
  are refused (:class:`LoweringError`): TVM prints them as a C cast between unrelated storage
  types, which no CUDA compiler accepts.
* :func:`Float8StorageLegalize` (in place of TVM's ``FP8StorageLegalize``) keeps the storage of
  CUDA functions.
* :func:`cuda_fp8_on_every_arch` makes the prelude include cuda_fp8.h for every architecture (the
  device source, and TVM's own CUDA build through ``tvm_callback_cuda_postproc``).

float8 formats CUDA has no type for (the ``fnuz`` ones, ``float8_e3m4``, ``float8_e4m3``) are
refused when lowering starts (:func:`refuse_float8_without_cuda_type`; TVM's legalization gave
them wrong values below sm_89 and its code generator refused them from sm_89 on). Metal and
OpenCL refuse float8 altogether (lowering/cpu_dtypes.py); ROCm keeps TVM's passes.

float6 and float4 on CUDA: arithmetic and math are computed in float32 and rounded back as for
float8; float6 below sm_100 and float4 below sm_80 are refused when the CUDA functions are
legalized (:func:`refuse_narrow_floats_before_cuda_arch`): TVM's prelude includes cuda_fp6.h only
from sm_100, and cuda_fp4.h needs the bfloat16 types TVM legalizes away below sm_80.
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import tirx

from ..errors import LoweringError, TargetFeatureError
from .atomics import checked_map
from .cpu_dtypes import first_use
from .math_widening import dtype_of, element, with_lanes

__all__ = ["CUDA_FLOAT8", "Float8ComputeLegalize", "Float8StorageLegalize", "cuda_fp8_on_every_arch", "is_float8",
           "refuse_float8_without_cuda_type"]

#: The float8 dtypes CUDA has a type for (cuda_fp8.h), the only ones TVM's CUDA code generator prints.
CUDA_FLOAT8 = ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")

#: TVM's math functions: float8 operands and results are computed in float32.
_MATH = frozenset(
    f"tirx.{n}"
    for n in (
        "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh",
        "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2", "pow", "fabs", "floor", "ceil", "trunc",
        "round", "nearbyint", "fmod", "fma", "copysign", "ldexp", "nextafter", "hypot", "erf", "sigmoid", "isnan",
        "isinf", "isfinite",
    )
)

#: TVM 0.27's CUDA prelude: cuda_fp8.h and the ``fp8_*`` aliases for the host pass and sm_89+ only.
FP8_GUARD = "#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 890)\n#include <cuda_fp8.h>"
#: The same block for every architecture (cuda_fp8.h converts in software below sm_89).
FP8_EVERY_ARCH = "#if 1  /* tilelang: every architecture (lowering/float8_cuda.py) */\n#include <cuda_fp8.h>"


def is_float8(expr: Any) -> bool:
    """Whether ``expr`` is a float8 (vector) value (calls may have pointer types)."""
    dtype = getattr(getattr(expr, "ty", None), "dtype", None)
    return dtype is not None and str(dtype).startswith("float8")


#: float4/float6 on CUDA: dtype prefix -> (first architecture whose build has the type, header).
#: TVM's prelude includes cuda_fp6.h only for ``__CUDA_ARCH__ >= 1000``; cuda_fp4.h needs the
#: bfloat16 types, which TVM legalizes away below sm_80 ('identifier "nv_bfloat162" is undefined').
NARROW_CUDA_ARCH = {"float6_": (100, "cuda_fp6.h"), "float4_": (80, "cuda_fp4.h")}  # not float64


def _is_narrow(expr: Any) -> bool:
    """Whether ``expr`` is a float8, float6 or float4 (vector) value: arithmetic in float32."""
    dtype = getattr(getattr(expr, "ty", None), "dtype", None)
    return is_float8(expr) or (dtype is not None and str(dtype).startswith(tuple(NARROW_CUDA_ARCH)))


def _convert(dtype: str, value: Any) -> Any:
    """``Cast(dtype, value)``, refused for float8 vectors of more than 4 lanes."""
    if tvm.DataType(dtype).lanes > 4:
        raise LoweringError(
            f"the float8 vector conversion {dtype_of(value)} -> {dtype} ({value}) does not compile for CUDA: "
            "cuda_fp8.h converts float8 vectors of 2 or 4 lanes, and TVM's CUDA code generator prints a C cast "
            "between unrelated storage types for more. Vectorize float8 conversions and arithmetic by 4 lanes "
            "or fewer (T.vectorized(4))"
        )
    return tirx.Cast(dtype, value)


def _f32(x: Any) -> Any:
    return _convert(with_lanes("float32", dtype_of(x)), x) if _is_narrow(x) else x


def _bfloat16_vector(expr: Any) -> bool:
    """A bfloat16 vector: TVM's ``nv_bfloat164`` takes ``__nv_fp8x4_e5m2`` through a conversion to
    ``__nv_bfloat162`` that cuda_fp8.h lacks (nvcc: "no suitable user-defined conversion")."""
    dtype = dtype_of(expr)
    return element(dtype) == "bfloat16" and dtype != "bfloat16"


def _other_vector(expr: Any) -> bool:
    """A vector of integers, bool or float64: cuda_fp8.h converts ``__nv_fp8x2/x4_*`` only from and
    to float32, float16 (and float64 to float8) vectors; nvcc refused the others ("no suitable
    user-defined conversion from "ushort4" to "__nv_fp8x4_e4m3"", found by a fuzz pass)."""
    dtype = dtype_of(expr)
    return tvm.DataType(dtype).lanes > 1 and element(dtype) not in ("float32", "float16", "bfloat16") and not is_float8(expr)


def _rewrites() -> list:
    """The ``structural_map`` entries of :func:`Float8ComputeLegalize` (post-order: operands first)."""

    def arithmetic(make: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
        def rewrite(node: Any) -> Any:
            if not _is_narrow(node):
                return node
            return _convert(dtype_of(node), make(_f32(node.a), _f32(node.b)))

        return rewrite

    def comparison(make: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
        def rewrite(node: Any) -> Any:
            return make(_f32(node.a), _f32(node.b)) if _is_narrow(node.a) else node

        return rewrite

    def on_cast(node: Any) -> Any:
        if not (is_float8(node) or is_float8(node.value)) or dtype_of(node) == dtype_of(node.value):
            return node
        _convert(dtype_of(node), node.value)  # refuses more than 4 lanes
        if is_float8(node.value) and (is_float8(node) or _bfloat16_vector(node) or _other_vector(node)):
            # no __nv_fp8_* operator gives these; the float32 value is exact
            return tirx.Cast(dtype_of(node), _f32(node.value))
        if is_float8(node) and _other_vector(node.value) and element(dtype_of(node.value)) != "float64":
            # an integer vector: through float32, as cuda_fp8.h converts an integer scalar
            return tirx.Cast(dtype_of(node), tirx.Cast(with_lanes("float32", dtype_of(node.value)), node.value))
        return node

    def on_call(node: Any) -> Any:
        if getattr(node.op, "name", None) not in _MATH or not (_is_narrow(node) or any(_is_narrow(a) for a in node.args)):
            return node
        ret = dtype_of(node)
        wide = with_lanes("float32", ret) if _is_narrow(node) else ret
        call = tvm.ir.Call(node.op, [_f32(a) for a in node.args], ret_ty=wide)
        return _convert(ret, call) if wide != ret else call

    return [
        *[(kind, arithmetic(kind)) for kind in (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod,
                                                tirx.Min, tirx.Max)],
        *[(kind, comparison(kind)) for kind in (tirx.LT, tirx.LE, tirx.GT, tirx.GE, tirx.EQ, tirx.NE)],
        (tirx.Cast, on_cast),
        (tvm.ir.Call, on_call),
    ]


def _cuda(func: Any) -> bool:
    target = func.attrs.get("target") if func.attrs is not None else None
    return target is not None and target.kind.name == "cuda"


def _split_by_target(mod: tvm.IRModule, on_cuda: Callable[[Any], Any], tvm_pass: tvm.transform.Pass) -> tvm.IRModule:
    """``on_cuda`` on the CUDA PrimFuncs of ``mod``, ``tvm_pass`` on a module of the others."""
    cuda = {gv: f for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc) and _cuda(f)}
    if not cuda:
        return tvm_pass(mod)
    rest = tvm_pass(tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv not in cuda}, attrs=mod.attrs))
    funcs = dict(rest.functions.items())
    funcs.update({gv: on_cuda(f) for gv, f in cuda.items()})
    return tvm.IRModule(funcs, attrs=mod.attrs)


def refuse_narrow_floats_before_cuda_arch(func: tirx.PrimFunc) -> None:
    """Raise when CUDA function ``func`` uses float6 below sm_100 or float4 below sm_80
    (:data:`NARROW_CUDA_ARCH`); a target without ``-arch`` is not refused.

    :raises TargetFeatureError: naming the dtype, the first use, the architecture and what is needed.
    """
    from .target import arch_of
    from .tma_atomics import arch_number

    target = func.attrs.get("target") if func.attrs is not None else None
    number = arch_number(target) if target is not None else None
    if number is None:
        return
    arch = arch_of(target)
    for prefix, (first, header) in NARROW_CUDA_ARCH.items():
        if number >= first:
            continue
        use = first_use(func, lambda d, p=prefix: element(str(d)).startswith(p))
        if use is not None:
            dtype, what = use
            name = func.attrs.get("global_symbol", "main") if func.attrs is not None else "main"
            raise TargetFeatureError(
                f"kernel '{name}' uses {dtype} ({what}), which CUDA cannot compile for {arch}: its type "
                f"({header}) needs sm_{first} or newer. Target sm_{first}+ (cuda -arch=sm_{first}...), or keep "
                "the tensor in float8/float16 for this architecture"
            )


def _legalize_cuda(func: tirx.PrimFunc) -> tirx.PrimFunc:
    refuse_narrow_floats_before_cuda_arch(func)
    body = checked_map(func.body, _rewrites())
    return func if body.same_as(func.body) else func.with_body(body)


def Float8ComputeLegalize() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """float8 arithmetic of CUDA functions in float32, rounded back after each operation (module
    docstring); TVM's ``FP8ComputeLegalize`` on the other functions."""

    def transform(mod: tvm.IRModule, ctx: Any) -> tvm.IRModule:  # noqa: ARG001
        return _split_by_target(mod, _legalize_cuda, tirx.transform.FP8ComputeLegalize())

    return tvm.transform.module_pass(transform, opt_level=0, name="tl.Float8ComputeLegalize")


def Float8StorageLegalize() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """TVM's ``FP8StorageLegalize`` on every function but the CUDA ones (which keep ``__nv_fp8_*``)."""

    def transform(mod: tvm.IRModule, ctx: Any) -> tvm.IRModule:  # noqa: ARG001
        return _split_by_target(mod, lambda f: f, tirx.transform.FP8StorageLegalize())

    return tvm.transform.module_pass(transform, opt_level=0, name="tl.Float8StorageLegalize")


def cuda_fp8_on_every_arch(source: str) -> str:
    """``source`` (CUDA) with TVM's float8 prelude (cuda_fp8.h, the ``fp8_*`` aliases) for every
    architecture, not only the host pass and sm_89+."""
    return source.replace(FP8_GUARD, FP8_EVERY_ARCH)


def _foreign_float8(dtype: Any) -> bool:
    name = element(str(dtype))
    return name.startswith("float8") and name not in CUDA_FLOAT8


def refuse_float8_without_cuda_type(func: tirx.PrimFunc, location: str, name: str) -> None:
    """Raise when ``func``, lowered for CUDA, uses a float8 format CUDA has no type for
    (``float8_e4m3fnuz``, ``float8_e5m2fnuz``, ``float8_e4m3b11fnuz``, ``float8_e3m4``, ``float8_e4m3``).

    :raises TargetFeatureError: naming the first tensor, buffer or conversion of such a format.
    """
    use = first_use(func, _foreign_float8)
    if use is None:
        return
    dtype, what = use
    raise TargetFeatureError(
        f"{location}: kernel '{name}' uses {dtype} ({what}), which CUDA targets cannot compile: CUDA's float8 "
        f"types (cuda_fp8.h) are {', '.join(CUDA_FLOAT8)}. Use one of those (tilelang.language.fp8."
        "determine_fp8_type() picks the platform's format), or convert the tensor before the kernel "
        "(x.to(torch.float8_e4m3fn))"
    )
