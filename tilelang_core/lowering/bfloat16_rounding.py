"""bfloat16 values rounded to bfloat16 where they are made, on targets without bfloat16 arithmetic.

TVM 0.27's ``BF16ComputeLegalize`` computes bfloat16 in float32 on every target without native
bfloat16 (``c``, ``llvm``, CUDA before sm_80): each bfloat16 operation becomes its float32
operation, a cast to bfloat16 becomes a cast to float32, and the only rounding left is the one of
a store into a bfloat16 buffer. So, silently, on every CPU pair:

- ``T.cast(T.cast(x, "bfloat16"), "float32")`` returned ``x`` unchanged (the C read
  ``Z_ptr[i] = X_ptr[i];``): the legalizer drops a float32 -> bfloat16 -> float32 pair;
- a chain of bfloat16 operations was rounded once, where it was stored: a product of three
  bfloat16 values gave 3440 where torch, which rounds every operation, gives 3456 (so do CUDA's
  bfloat16 operators); a bfloat16 local buffer held float32 values;
- a bfloat16 constant kept its double (``Y[i] * 1.1`` multiplied by 1.1, not by 1.1015625), and
  on CUDA before sm_80 a math function's float32 result was used unrounded;
- the store's rounding (``(bits + 0x7fff + lsb) >> 16``) made an infinity of a float32 NaN whose
  payload lies in the low 16 bits, and zero of the NaN ``0xffffffff``.

:func:`RoundBFloat16` runs right before ``BF16ComputeLegalize`` (``passes._bf16_compute``) where
that computes in float32, and makes the rounding explicit where bfloat16 values are made: each
bfloat16 ``+ - * /``, each cast to bfloat16 from another type and each call with a bfloat16
result (``reinterpret``, ``if_then_else`` and ``likely`` make no new value) becomes
``Cast("bfloat16", round(<float32 value>))``, ``round`` giving the float32 value of the nearest
bfloat16, ties to even; a NaN becomes bfloat16's quiet NaN ``0x7fc0`` (c10's
``round_to_nearest_even`` does the same). The legalizer keeps the rounded float32 (it drops the
outer cast) and a store's rounding of that exact value is exact. bfloat16 constants are rounded
here (and by ``T.bfloat16(v)`` itself, language/dtypes.py, before TVM folds them into float32
expressions).

``round`` is a call the legalizer cannot see through (it legalizes the operands and keeps the
float32 result):

- ``c``: ``tl_bf16_round(x)``, a static inline C helper on the bits (``__builtin_memcpy``, no
  aliasing) defined once in the source, which the compiler inlines and vectorizes;
- CUDA before sm_80: the same helper on ``__float_as_uint``;
- ``llvm``: the same computation in TIR, the bits bound once by a ``Let`` (vector lanes too),
  put in place of the call right after the legalizer (:func:`ExpandBFloat16Rounding`: the
  legalizer does not legalize a ``Let``'s value; TVM's C code generator would print a ``Let`` as a
  declaration before the statement, evaluating an operand of ``if_then_else`` unguarded).

Cost: a ``+ - * /`` of two bfloat16 values is rounded by ``tl_bf16_round_op``, five integer
operations without the NaN test: its operands are bfloat16 values (their low 16 bits are zero),
so a NaN result is a quieted operand or the CPU's default NaN (x86 ``0xffc00000``, AArch64 and
LLVM's preferred ``0x7fc00000``), whose low 16 bits are zero too, and the rounding keeps it as it
is. CUDA's default NaN is ``0x7fffffff``: there every rounding tests for NaN.

A float64 or integer value becomes bfloat16 with one rounding: it is rounded to float32 *to odd*
first (``tl_bf16_round_f64``), which, with more than two bits to spare, makes the rounding to
nearest bfloat16 after it the correctly rounded one (a plain float32 conversion first rounds
twice: ``1 + 2**-8 + 2**-30`` became 1.0 instead of 1.0078125). Integers go through float64,
exact up to ``2**53``.

bfloat16 scalar parameters (``s: T.bfloat16``) did not lower on any CPU target (C: "Cannot
convert type bfloat16 to C type"; llvm: "Check failed: dtype.code() == kDLFloat", TVM's packed
API converting its float64 argument straight to bfloat16). :func:`float32_bfloat16_params` makes
such a parameter a float32 parameter of the same name, read as ``T.cast(s, "bfloat16")``
(rounded as above): the C entry takes a ``float`` (``KernelArg.dtype`` says so), TVM's packed
function a float. The artifact's parameter is still declared ``bfloat16``.

Native bfloat16 (CUDA sm_80 and later, TVM's own test) is left to the GPU, which rounds every
operation. Metal and ROCm are left as TVM legalizes them. See docs/pipeline.md.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.dtypes import representable_constant
from .atomics import checked_map
from .math_widening import dtype_of, element, with_lanes
from .signature import is_tensor_param
from .source_imports import c_definitions, with_import, with_import_in_first_kernel

__all__ = ["ExpandBFloat16Rounding", "RoundBFloat16", "bfloat16_native", "float32_bfloat16_params"]

BF16 = "bfloat16"

#: The rounding helpers (C and CUDA functions; TIR forms on ``llvm``), each giving the float32
#: value of the nearest bfloat16: of a float32 value, of the float32 result of an operation on
#: bfloat16 values (no NaN test, see the module docstring), of a float64 value.
ROUND, ROUND_OP, ROUND_F64 = "tl_bf16_round", "tl_bf16_round_op", "tl_bf16_round_f64"

#: What a NaN rounds to: bfloat16's quiet NaN ``0x7fc0`` (a store's rounding keeps it).
QUIET_NAN = 0x7FC00000

#: Calls with a bfloat16 result that make no new value: left unrounded.
_EXACT_CALLS = frozenset(("tirx.reinterpret", "prim.if_then_else", "prim.likely"))

_NEAREST = "(b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u"
_WITH_NAN = f"(b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : {_NEAREST}"


def _c_rounding(name: str, bits: str) -> str:
    """C definition of a helper ``float name(float x)`` that replaces ``x``'s bits ``b`` by ``bits``."""
    return (
        f"static inline float {name}(float x) {{\n  uint32_t b;\n  __builtin_memcpy(&b, &x, 4);\n"
        f"  b = {bits};\n  __builtin_memcpy(&x, &b, 4);\n  return x;\n}}\n"
    )


#: C definitions of the helpers, by name.
_C_HELPERS = {
    ROUND: _c_rounding(ROUND, _WITH_NAN),
    ROUND_OP: _c_rounding(ROUND_OP, _NEAREST),
    ROUND_F64: """\
static inline float tl_bf16_round_f64(double x) {
  float y = (float)x;
  double back = (double)y;
  if (back != x) { /* y rounded to odd: toward zero, lowest bit set (a NaN stays a NaN) */
    uint32_t b;
    __builtin_memcpy(&b, &y, 4);
    if (x > 0 ? back > x : back < x) b -= 1u;
    b |= 1u;
    __builtin_memcpy(&y, &b, 4);
  }
  return tl_bf16_round(y);
}
""",
}

#: CUDA definitions of the helpers (GPUs before sm_80), by name; every one tests for NaN.
_CUDA_HELPERS = {
    ROUND: f"""\
static __device__ __forceinline__ float tl_bf16_round(float x) {{
  unsigned int b = __float_as_uint(x);
  b = {_WITH_NAN};
  return __uint_as_float(b);
}}
""",
    ROUND_F64: """\
static __device__ __forceinline__ float tl_bf16_round_f64(double x) {
  float y = (float)x;
  double back = (double)y;
  if (back != x) { /* y rounded to odd: toward zero, lowest bit set (a NaN stays a NaN) */
    unsigned int b = __float_as_uint(y);
    if (x > 0 ? back > x : back < x) b -= 1u;
    y = __uint_as_float(b | 1u);
  }
  return tl_bf16_round(y);
}
""",
}


def _helper_text(kind: str, used: set) -> str:
    """The definitions of the ``used`` helpers for ``"c"`` or ``"cuda"``, each guarded so that
    it is defined once per translation unit (the C runtime module joins two sources)."""
    helpers = _C_HELPERS if kind == "c" else _CUDA_HELPERS
    needed = set(used) | ({ROUND} if ROUND_F64 in used else set())
    parts = []
    for name in (ROUND, ROUND_OP, ROUND_F64):
        if name in needed:
            guard = f"{name.upper()}_DEFINED"
            parts.append(f"#ifndef {guard}\n#define {guard}\n{helpers[name]}#endif\n")
    header = "\n/* tilelang bfloat16 rounding (lowering/bfloat16_rounding.py) */\n"
    if kind == "c":
        return c_definitions(header + "#include <stdint.h>\n", parts)
    return header + "".join(parts)


def bfloat16_native(target: Any) -> bool:
    """Whether ``target`` computes bfloat16 natively, as TVM's ``BF16ComputeLegalize`` decides
    (CUDA sm_80 and later): there the legalizer and this module leave bfloat16 alone."""
    if target is None or target.kind.name != "cuda":
        return False
    version = tvm.get_global_func("tvm.support.nvcc.get_compute_version", allow_missing=True)
    supports = tvm.get_global_func("tvm.support.nvcc.supports_bf16", allow_missing=True)
    if version is None or supports is None:
        return False
    return bool(supports(version(target)))


def _const(value: Any, dtype: str) -> Any:
    return tirx.const(value, dtype)


def _tir_round(x: Any, nan_test: bool = True) -> Any:
    """The TIR form of ``tl_bf16_round`` (``nan_test=False``: of ``tl_bf16_round_op``) of the
    float32 (vector) value ``x``."""
    f32 = dtype_of(x)
    u32 = with_lanes("uint32", f32)
    b = tirx.Var("tl_bf16_bits", u32)
    lsb = (b >> _const(16, u32)) & _const(1, u32)
    bits = (b + _const(0x7FFF, u32) + lsb) & _const(0xFFFF0000, u32)
    if nan_test:
        nan = (b & _const(0x7FFFFFFF, u32)) > _const(0x7F800000, u32)
        bits = tirx.Select(nan, _const(QUIET_NAN, u32), bits)
    return tirx.Let(b, tirx.reinterpret(u32, x), tirx.reinterpret(f32, bits))


def _tir_round_f64(x: Any) -> Any:
    """The TIR form of ``tl_bf16_round_f64`` of the float64 (vector) value ``x``."""
    f64 = dtype_of(x)
    f32, u32 = with_lanes("float32", f64), with_lanes("uint32", f64)
    wide = tirx.Var("tl_bf16_wide", f64)
    narrow = tirx.Var("tl_bf16_narrow", f32)
    back = tirx.Cast(f64, narrow)
    bits = tirx.reinterpret(u32, narrow)
    away = tirx.Select(wide > _const(0.0, f64), back > wide, back < wide)  # abs(narrow) > abs(wide)
    toward_zero = tirx.Select(away, bits - _const(1, u32), bits)
    odd = tirx.Select(back != wide, toward_zero | _const(1, u32), bits)
    return _tir_round(tirx.Let(wide, x, tirx.Let(narrow, tirx.Cast(f32, wide), tirx.reinterpret(f32, odd))))


#: The TIR form of each helper (the ``llvm`` path).
_TIR_FORMS = {ROUND: _tir_round, ROUND_OP: lambda x: _tir_round(x, nan_test=False), ROUND_F64: _tir_round_f64}


class _Rounding:
    """The helper calls of one target kind (``"c"``, ``"llvm"`` or ``"cuda"``) and which were used.
    Each method gives the float32 value of the nearest bfloat16 of its operand, or None for a
    vector value on C (refused earlier) and CUDA (left to TVM)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.used: set = set()

    def _call(self, name: str, x: Any) -> Optional[Any]:
        if self.kind != "llvm" and tvm.DataType(dtype_of(x)).lanes != 1:
            return None
        self.used.add(name)
        return tirx.call_pure_extern(with_lanes("float32", dtype_of(x)), name, x)

    def f32(self, x: Any) -> Optional[Any]:
        return self._call(ROUND, x)

    def op(self, x: Any) -> Optional[Any]:
        """Of the float32 result of ``+ - * /`` on bfloat16 values (CUDA: with the NaN test)."""
        return self._call(ROUND if self.kind == "cuda" else ROUND_OP, x)

    def f64(self, x: Any) -> Optional[Any]:
        return self._call(ROUND_F64, x)


def _rounded_value(value: Any, rounding: _Rounding) -> Optional[Any]:
    """``value`` (any numeric dtype) as the float32 value of its nearest bfloat16, or None."""
    dtype = dtype_of(value)
    bits = tvm.DataType(dtype).bits
    source = element(dtype)
    if source == "float32":
        return rounding.f32(value)
    if source == "float64":
        return rounding.f64(value)
    integer = source.startswith("int") or source.startswith("uint")
    if bits <= 16 and (source.startswith("float") or integer or source == "bool"):  # exact in float32
        return rounding.f32(tirx.Cast(with_lanes("float32", dtype), value))
    if integer:
        return rounding.f64(tirx.Cast(with_lanes("float64", dtype), value))  # exact up to 2**53
    return None


def _bf16(expr: Any) -> bool:
    """Whether ``expr`` is a bfloat16 (vector) value (calls may have pointer types)."""
    dtype = getattr(getattr(expr, "ty", None), "dtype", None)
    return dtype is not None and element(str(dtype)) == BF16


def _rewriter(rounding: _Rounding) -> list:
    """The ``structural_map`` entries of :func:`RoundBFloat16` for one function."""

    def rounded(node: Any, value: Optional[Any]) -> Any:
        return node if value is None else tirx.Cast(dtype_of(node), value)

    def binary(make: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
        def rewrite(node: Any) -> Any:
            if not _bf16(node):
                return node
            f32 = with_lanes("float32", dtype_of(node))
            return rounded(node, rounding.op(make(tirx.Cast(f32, node.a), tirx.Cast(f32, node.b))))

        return rewrite

    def on_cast(node: Any) -> Any:
        if not _bf16(node) or _bf16(node.value):
            return node
        return rounded(node, _rounded_value(node.value, rounding))

    def on_call(node: Any) -> Any:
        if not _bf16(node) or getattr(node.op, "name", None) in _EXACT_CALLS:
            return node
        return rounded(node, rounding.f32(tirx.Cast(with_lanes("float32", dtype_of(node)), node)))

    def on_float(imm: Any) -> Any:
        return representable_constant(imm) if _bf16(imm) else imm

    return [
        (tirx.Add, binary(tirx.Add)),
        (tirx.Sub, binary(tirx.Sub)),
        (tirx.Mul, binary(tirx.Mul)),
        (tirx.Div, binary(tirx.Div)),
        (tirx.Cast, on_cast),
        (tvm.ir.Call, on_call),
        (tirx.FloatImm, on_float),
    ]


def _kind_of(func: tirx.PrimFunc) -> Optional[str]:
    """``"c"``, ``"llvm"`` or ``"cuda"`` when ``func``'s target computes bfloat16 in float32 and
    this module rounds there, else None."""
    target = func.attrs.get("target") if func.attrs is not None else None
    if target is None:
        return None
    kind = target.kind.name
    if kind in ("c", "llvm") or (kind == "cuda" and not bfloat16_native(target)):
        return kind
    return None


def _uses_bf16(body: Any) -> bool:
    found: list = []

    def probe(node: Any) -> Any:
        if not found and _bf16(node):
            found.append(node)
        return node

    kinds = (tirx.Cast, tirx.FloatImm, tvm.ir.Call, tirx.Add, tirx.Sub, tirx.Mul, tirx.Div)
    tvm_ffi.structural_map(body, [(kinds, probe)])
    return bool(found)


def _round_module(mod: tvm.IRModule, ctx: Any) -> tvm.IRModule:  # noqa: ARG001
    funcs = dict(mod.functions.items())
    used: dict = {}  # target kind -> helper names used
    for gvar, func in list(funcs.items()):
        if not isinstance(func, tirx.PrimFunc):
            continue
        kind = _kind_of(func)
        if kind is None or not _uses_bf16(func.body):
            continue
        rounding = _Rounding(kind)
        funcs[gvar] = func.with_body(checked_map(func.body, _rewriter(rounding)))
        used.setdefault(kind, set()).update(rounding.used)
    for kind in ("c", "cuda"):  # the helpers once, in the first function (one source for all)
        if not used.get(kind):
            continue
        text = _helper_text(kind, used[kind])
        for gvar, func in funcs.items():
            if not isinstance(func, tirx.PrimFunc) or _kind_of(func) != kind:
                continue
            if kind == "c":
                funcs[gvar] = func.with_body(with_import(func.body, "pragma_import_c", text))
                break
            body, placed = with_import_in_first_kernel(func.body, text)
            if placed:
                funcs[gvar] = func.with_body(body)
                break
    return tvm.IRModule(funcs, attrs=mod.attrs)


def RoundBFloat16() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass making bfloat16 rounding explicit, to run right before ``BF16ComputeLegalize``
    (see the module docstring); functions whose target has native bfloat16 are left alone."""
    return tvm.transform.module_pass(_round_module, opt_level=0, name="tl.RoundBFloat16")


def _expand(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    if _kind_of(func) != "llvm":
        return func

    def on_call(call: Any) -> Any:
        if getattr(call.op, "name", None) != "tirx.call_pure_extern" or not call.args:
            return call
        form = _TIR_FORMS.get(getattr(call.args[0], "value", None))
        return call if form is None else form(call.args[1])

    body = checked_map(func.body, [(tvm.ir.Call, on_call)])
    return func if body.same_as(func.body) else func.with_body(body)


def ExpandBFloat16Rounding() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass to run right after ``BF16ComputeLegalize``: on ``llvm`` each rounding helper
    call becomes its TIR form (before the legalizer it could not be: the legalizer does not
    legalize a ``Let``'s value)."""
    return tirx.transform.prim_func_pass(_expand, opt_level=0, name="tl.ExpandBFloat16Rounding")


def float32_bfloat16_params(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each bfloat16 scalar parameter made a float32 parameter of the same name,
    read in the body as a cast to bfloat16 (which rounds); ``func`` itself without such
    parameters."""
    replaced: list = []
    params = []
    for param in func.params:
        if not is_tensor_param(param) and str(param.ty.dtype) == BF16:
            wide = tirx.Var(param.name, "float32")
            replaced.append((param, wide))
            params.append(wide)
        else:
            params.append(param)
    if not replaced:
        return func

    def on_var(var: Any) -> Any:
        for old, new in replaced:
            if var.same_as(old):
                return tirx.Cast(BF16, new)
        return var

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.Var, on_var)])
    return tirx.PrimFunc(params, body, func.ret_type, func.attrs, func.span)
