"""Math / GPU intrinsic marker calls (``tl.math``) -> target code.

The intrinsics of :mod:`tilelang_core.language.tileops.intrinsics` leave marker calls
``call_extern(dtype, "tl.math", name, rounding_mode, loc, *args)``.

**CUDA** (:func:`lower_gpu_intrinsics`): the CUDA intrinsic: ``__expf`` & co. for float32 fast
math, ``__fadd_rz``/``__dmul_ru``/``__fmaf_rd``/``__frcp_rn``/``__fsqrt_ru``/``__frsqrt_rn``/
``__fdiv_rz``... for the IEEE operations, ``__dp4a``, ``__any_sync``/``__all_sync``/
``__ballot_sync``/``__activemask``, ``__syncthreads_and/or/count``, ``__shfl_*_sync``,
``__match_any/all_sync``, ``__ldg``, ``threadIdx``/``blockIdx`` (the last two by the frontend).

**CPU** (:func:`lower_cpu_intrinsics`, target ``c`` or ``llvm``):

- fast math: the precise function of TVM's math intrinsics (``expf``, ``exp10``, ...; 16-bit
  floats computed in float32), i.e. at least as accurate as CUDA's approximations;
- IEEE operations, round to nearest: the C/LLVM operation (``+``, ``*``, ``fmaf``/``llvm.fma``,
  ``/``, ``sqrt``; ``fma``/``fmaf``; ``frsqrt`` is ``1 / sqrt(x)``, two roundings). Directed modes (rz/ru/rd):
  the nearest result corrected by one ulp toward the requested direction when the exact error
  (from an error-free transformation: TwoSum for add/sub, ``fma`` residuals for mul/div/sqrt/rcp)
  shows the exact value lies on the other side. That is the correctly rounded result whenever
  the error term is itself exact (results and residuals neither overflow nor underflow).
  ``ieee_fmaf`` of float32 in a directed mode decides the direction from the product and sum
  recomputed in float64 (the product is exact there; the sum has one float64 rounding), so it
  can be one ulp off only when the exact result lies within 2^-53 (relative) of a float32 value;
  of float64, from the exact error of the fma (Boldo and Muller's ErrFma: TwoProduct, two
  TwoSums), correct under the same condition as the others;
- ``dp4a``: four int8 products added to the int32 accumulator;
- GPU-only intrinsics: a :class:`LoweringError` at the intrinsic's line;
- barriers (``T.sync_threads``, ``T.sync_warp``, and TVM's ``T.tvm_storage_sync`` written in a
  kernel): dropped, a CPU block runs as one thread (the warp helpers and barriers are
  :mod:`tilelang_core.lowering.warp`'s);
- ``T.pdl_trigger`` / ``T.pdl_sync``: dropped, CPU launches are serialized (on CUDA they are
  ``griddepcontrol`` helpers; both in :mod:`tilelang_core.lowering.pdl`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from .atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END, checked_map
from .markers import marker_call_args
from .source_imports import c_definitions, with_import, with_import_in_first_kernel
from . import pdl, tma_atomics, warp

MATH_CALL = "tl.math"
_FAST = {"__exp": "exp", "__exp10": "exp10", "__log": "log", "__log2": "log2", "__log10": "log10",
         "__tan": "tan", "__cos": "cos", "__sin": "sin"}
_GPU_ONLY = (
    "any_sync", "all_sync", "ballot_sync", "activemask", "syncthreads_and", "syncthreads_or",
    "syncthreads_count", "shfl_sync", "shfl_xor", "shfl_down", "shfl_up", "match_any_sync",
    "match_all_sync", "thread_binding", "block_binding", "__ldg", "__ffs", "__fns",
) + warp.GPU_ONLY
_PUBLIC_NAME = {"thread_binding": "get_thread_binding", "block_binding": "get_block_binding", **warp.PUBLIC_NAME}


@dataclass
class MathOp:
    """One parsed marker call."""

    name: str
    mode: str
    loc: str
    dtype: str
    args: list


def parse(expr: Any) -> Optional[MathOp]:
    """The :class:`MathOp` of a marker call, else None."""
    args = marker_call_args(expr, MATH_CALL)
    if args is None or len(args) < 3:
        return None
    return MathOp(args[0].value, args[1].value, args[2].value, str(expr.ty.dtype), args[3:])


def contains_intrinsics(node: Any) -> bool:
    """Whether a statement or expression contains a ``tl.math`` marker call."""
    found = []

    def on_call(call):
        if parse(call) is not None:
            found.append(call)
        return call

    tvm_ffi.structural_map(node, [(tvm.ir.Call, on_call)])
    return bool(found)


def _in_f32(dtype: str, fn, *args):
    """``fn`` applied in float32 for 16-bit floats (TVM's math intrinsics need 32/64-bit floats)."""
    if dtype in ("float16", "bfloat16"):
        return tirx.Cast(dtype, fn(*[tirx.Cast("float32", a) for a in args]))
    return fn(*args)


def _precise(name: str):
    """The precise TVM math function behind fast-math intrinsic ``name`` on CPU targets
    (``exp10`` as ``pow(10, x)``: TVM lowers no ``exp10`` for target c)."""
    if name == "__exp10":
        return lambda x: tirx.power(tirx.FloatImm(str(x.ty.dtype), 10.0), x)
    return getattr(tirx, _FAST[name])


def _dp4a_store(m: MathOp) -> Any:
    """``C[c] = C[c] + sum_k int32(A[a+k]) * int32(B[b+k])`` as a statement."""
    a, b, c = (p.args[0] for p in m.args)

    def shifted(load, k):
        idx = list(load.indices)
        idx[-1] = idx[-1] + k if k else idx[-1]
        return load.source[tuple(idx)]

    total = c
    for k in range(4):
        total = total + tirx.Cast("int32", shifted(a, k)) * tirx.Cast("int32", shifted(b, k))
    return tirx.BufferStore(c.source, total, list(c.indices))


# --------------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------------

_C_FLOAT = {"float32": "float", "float64": "double"}
_C_SUFFIX = {"float32": "f", "float64": ""}


def _c_directed(name: str, op: str, dtype: str, mode: str) -> str:
    """C text of one directed-rounding helper ``name`` (``op``: add sub mul div sqrt rcp fma)."""
    t, f = _C_FLOAT[dtype], _C_SUFFIX[dtype]
    fix = {
        "ru": "if (e > 0) r = nextafter{f}(r, INFINITY);",
        "rd": "if (e < 0) r = nextafter{f}(r, -INFINITY);",
        "rz": "if ((r > 0 && e < 0) || (r < 0 && e > 0)) r = nextafter{f}(r, ({t})0);",
    }[mode].format(f=f, t=t)
    if op == "fma" and dtype == "float32":
        return (
            f"static inline float {name}(float a, float b, float c) {{\n"
            "  float r = fmaf(a, b, c);\n"
            "  if (!isfinite(r)) return r;\n"
            "  double d = (double)a * (double)b + (double)c; double e = d - (double)r;\n"
            f"  {fix}\n  return r;\n}}\n"
        )
    if op == "fma":
        # ErrFma (Boldo & Muller): a*b + c - r = g + z up to a term below half an ulp of g + z,
        # so the sign of g + z is the sign of the exact error. The rounded product u1 is kept in
        # a volatile so that the C compiler cannot contract u1 + a1 into another fma.
        return (
            f"static inline double {name}(double a, double b, double c) {{\n"
            "  double r = fma(a, b, c);\n"
            "  if (!isfinite(r)) return r;\n"
            "  volatile double u1v = a * b; double u1 = u1v; double u2 = fma(a, b, -u1);\n"
            "  double a1 = c + u2; double t = a1 - c; double z = (c - (a1 - t)) + (u2 - t);\n"
            "  double b1 = u1 + a1; t = b1 - u1; double b2 = (u1 - (b1 - t)) + (a1 - t);\n"
            "  double e = ((b1 - r) + b2) + z;\n"
            "  if (!isfinite(e)) return r;\n"
            f"  {fix}\n  return r;\n}}\n"
        )
    if op in ("add", "sub"):
        sign = "+" if op == "add" else "-"
        head = f"static inline {t} {name}({t} a, {t} b0) {{\n  {t} b = {sign}b0; {t} r = a + b;\n"
        err = f"  {t} bb = r - a; {t} e = (a - (r - bb)) + (b - bb);\n"
    elif op == "mul":
        head = f"static inline {t} {name}({t} a, {t} b) {{\n  {t} r = a * b;\n"
        err = f"  {t} e = fma{f}(a, b, -r);\n"
    elif op in ("div", "rcp"):
        args = f"{t} a, {t} b" if op == "div" else f"{t} b"
        one = "" if op == "div" else f"  {t} a = 1;\n"
        head = f"static inline {t} {name}({args}) {{\n{one}  {t} r = a / b;\n"
        err = f"  {t} e = fma{f}(-r, b, a); if (b < 0) e = -e;\n"
    else:  # sqrt
        head = f"static inline {t} {name}({t} a) {{\n  {t} r = sqrt{f}(a);\n"
        err = f"  {t} e = fma{f}(-r, r, a);\n"
    return head + "  if (!isfinite(r)) return r;\n" + err + f"  if (!isfinite(e)) return r;\n  {fix}\n  return r;\n}}\n"


_LL_FLOAT = {"float32": "float", "float64": "double"}


def _ll_directed(name: str, op: str, dtype: str, mode: str) -> str:
    """LLVM IR text of one directed-rounding helper (same algorithm as :func:`_c_directed`)."""
    t = _LL_FLOAT[dtype]
    sfx = "f32" if dtype == "float32" else "f64"
    nextafter = "nextafterf" if dtype == "float32" else "nextafter"
    inf = "0x7FF0000000000000"
    if op == "fma" and dtype == "float64":
        head = f"define double @{name}(double %a, double %b, double %c) {{"
        body = [  # ErrFma, as in _c_directed (LLVM does not contract these: no fast-math flags)
            "  %r = call double @llvm.fma.f64(double %a, double %b, double %c)",
            "  %u1 = fmul double %a, %b", "  %nu1 = fneg double %u1",
            "  %u2 = call double @llvm.fma.f64(double %a, double %b, double %nu1)",
            "  %a1 = fadd double %c, %u2", "  %t1 = fsub double %a1, %c", "  %t2 = fsub double %a1, %t1",
            "  %t3 = fsub double %c, %t2", "  %t4 = fsub double %u2, %t1", "  %z = fadd double %t3, %t4",
            "  %b1 = fadd double %u1, %a1", "  %s1 = fsub double %b1, %u1", "  %s2 = fsub double %b1, %s1",
            "  %s3 = fsub double %u1, %s2", "  %s4 = fsub double %a1, %s1", "  %b2 = fadd double %s3, %s4",
            "  %g0 = fsub double %b1, %r", "  %g = fadd double %g0, %b2", "  %e = fadd double %g, %z",
        ]
        et, esfx = "double", "f64"
    elif op == "fma":
        head = f"define float @{name}(float %a, float %b, float %c) {{"
        body = [
            "  %r = call float @llvm.fma.f32(float %a, float %b, float %c)",
            "  %ad = fpext float %a to double", "  %bd = fpext float %b to double", "  %cd = fpext float %c to double",
            "  %pd = fmul double %ad, %bd", "  %dd = fadd double %pd, %cd", "  %rd = fpext float %r to double",
            "  %e = fsub double %dd, %rd",
        ]
        et, esfx = "double", "f64"
    else:
        et, esfx = t, sfx
        fma = f"@llvm.fma.{sfx}"
        if op in ("add", "sub"):
            head = f"define {t} @{name}({t} %a, {t} %b0) {{"
            b = "%b0"
            body = [f"  %b = fneg {t} %b0"] if op == "sub" else []
            b = "%b" if op == "sub" else "%b0"
            body += [
                f"  %r = fadd {t} %a, {b}", f"  %bb = fsub {t} %r, %a", f"  %t1 = fsub {t} %r, %bb",
                f"  %t2 = fsub {t} %a, %t1", f"  %t3 = fsub {t} {b}, %bb", f"  %e = fadd {t} %t2, %t3",
            ]
        elif op == "mul":
            head = f"define {t} @{name}({t} %a, {t} %b) {{"
            body = [f"  %r = fmul {t} %a, %b", f"  %nr = fneg {t} %r", f"  %e = call {t} {fma}({t} %a, {t} %b, {t} %nr)"]
        elif op in ("div", "rcp"):
            head = f"define {t} @{name}({t} %a, {t} %b) {{" if op == "div" else f"define {t} @{name}({t} %b) {{"
            a = "%a" if op == "div" else "1.0"
            body = [
                f"  %r = fdiv {t} {a}, %b", f"  %nr = fneg {t} %r",
                f"  %e0 = call {t} {fma}({t} %nr, {t} %b, {t} {a})",
                f"  %bneg = fcmp olt {t} %b, 0.0", f"  %ne0 = fneg {t} %e0", f"  %e = select i1 %bneg, {t} %ne0, {t} %e0",
            ]
        else:  # sqrt
            head = f"define {t} @{name}({t} %a) {{"
            body = [f"  %r = call {t} @llvm.sqrt.{sfx}({t} %a)", f"  %nr = fneg {t} %r",
                    f"  %e = call {t} {fma}({t} %nr, {t} %r, {t} %a)"]
        t = _LL_FLOAT[dtype]
    rt = t
    rsfx = "f32" if rt == "float" else "f64"
    lines = [head, "entry:"] + body + [
        f"  %ra = call {rt} @llvm.fabs.{rsfx}({rt} %r)",
        f"  %rfin = fcmp one {rt} %ra, {inf}",
        f"  %ea = call {et} @llvm.fabs.{esfx}({et} %e)",
        f"  %efin = fcmp one {et} %ea, {inf}",
        "  %fin = and i1 %rfin, %efin",
        f"  %epos = fcmp ogt {et} %e, 0.0",
        f"  %eneg = fcmp olt {et} %e, 0.0",
        f"  %rpos = fcmp ogt {rt} %r, 0.0",
        f"  %rneg = fcmp olt {rt} %r, 0.0",
    ]
    if mode == "ru":
        lines += ["  %want = and i1 %fin, %epos"]
        toward = inf
    elif mode == "rd":
        lines += ["  %want = and i1 %fin, %eneg"]
        toward = "0xFFF0000000000000"
    else:
        lines += ["  %w1 = and i1 %rpos, %eneg", "  %w2 = and i1 %rneg, %epos", "  %w = or i1 %w1, %w2", "  %want = and i1 %fin, %w"]
        toward = "0.0"
    nxt = "nextafterf" if rt == "float" else nextafter
    lines += [
        "  br i1 %want, label %step, label %done",
        "step:",
        f"  %s = call {rt} @{nxt}({rt} %r, {rt} {toward})",
        "  br label %done",
        "done:",
        f"  %out = phi {rt} [ %r, %entry ], [ %s, %step ]",
        f"  ret {rt} %out",
        "}",
    ]
    return "\n".join(lines) + "\n"


_LL_DECLS = """
declare float @llvm.fma.f32(float, float, float)
declare double @llvm.fma.f64(double, double, double)
declare float @llvm.sqrt.f32(float)
declare double @llvm.sqrt.f64(double)
declare float @llvm.fabs.f32(float)
declare double @llvm.fabs.f64(double)
declare float @nextafterf(float, float)
declare double @nextafter(double, double)
"""

_IEEE_OP = {"ieee_add": "add", "ieee_sub": "sub", "ieee_mul": "mul", "ieee_fdiv": "div", "ieee_frcp": "rcp",
            "ieee_fsqrt": "sqrt", "ieee_fmaf": "fma", "ieee_frsqrt": "rsqrt"}


def _cpu_nearest(m: MathOp, language: str) -> Any:
    a = m.args
    op = _IEEE_OP[m.name]
    if op == "add":
        return a[0] + a[1]
    if op == "sub":
        return a[0] - a[1]
    if op == "mul":
        return a[0] * a[1]
    if op == "div":
        return a[0] / a[1]
    one = tirx.FloatImm(m.dtype, 1.0)
    if op == "rcp":
        return one / a[0]
    if op == "sqrt":
        return tirx.sqrt(a[0])
    if op == "rsqrt":
        return one / tirx.sqrt(a[0])
    if language == "llvm":
        return tirx.call_llvm_pure_intrin(m.dtype, "llvm.fma", *a)
    return tirx.call_pure_extern(m.dtype, "fmaf" if m.dtype == "float32" else "fma", *a)


def _next_toward(value: Any, bits_dtype: str, float_dtype: str, away: Any) -> Any:
    """``value`` (a ``float_dtype``) moved one ulp: away from zero when ``away``, else toward it."""
    bits = tirx.reinterpret(bits_dtype, value)
    one = tirx.IntImm(bits_dtype, 1)
    return tirx.reinterpret(float_dtype, tirx.Select(away, bits + one, bits - one))


def _to_odd(value: Any, exact_above: Any, inexact: Any, bits_dtype: str, float_dtype: str) -> Any:
    """``value``, the nearest ``float_dtype`` to a number, rounded to odd instead: when the
    number is not ``value`` (``inexact``) and ``value``'s last bit is 0, the neighbour on the
    number's side (``exact_above``: farther from zero). A finite ``value`` only."""
    even = (tirx.reinterpret(bits_dtype, value) & tirx.IntImm(bits_dtype, 1)) == tirx.IntImm(bits_dtype, 0)
    fix = tirx.And(tirx.And(inexact, even), tirx.isfinite(value))
    return tirx.Select(fix, _next_toward(value, bits_dtype, float_dtype, exact_above), value)


def _half_fma(dtype: str, x: Any, y: Any, z: Any) -> Any:
    """``x * y + z`` of float16/bfloat16 operands with one rounding to nearest.

    The product is exact in float64 and TwoSum gives the sum's exact error, so ``s + err`` is
    the exact result. It is rounded to odd at float64, then at float32, then to nearest at
    ``dtype``: rounding to odd with at least two more bits than the final format, then to
    nearest, is the correctly rounded result (no double-rounding error), which a plain
    float32 or float64 fma followed by a cast is not when the exact value lies just off a
    midpoint of ``dtype``.
    """
    f64 = "float64"
    xd, yd, zd = (tirx.Cast(f64, v) for v in (x, y, z))
    p = xd * yd
    s = p + zd
    bb = s - p
    err = (p - (s - bb)) + (zd - bb)
    zero = tirx.FloatImm(f64, 0.0)
    s_odd = _to_odd(s, (err > zero) == (s > zero), err != zero, "uint64", f64)
    f = tirx.Cast("float32", s_odd)
    back = tirx.Cast(f64, f)
    f_odd = _to_odd(f, tirx.abs(s_odd) > tirx.abs(back), back != s_odd, "uint32", "float32")
    return tirx.Cast(dtype, f_odd)


def _ieee_16bit_in_wider(m: MathOp, language: str) -> Any:
    """An IEEE operation of float16/bfloat16 operands, rounded to nearest, computed in wider
    formats: on CPU targets, and for bfloat16 on CUDA GPUs without bfloat16 arithmetic (sm < 80).

    ``+ - * /``, the reciprocal and ``sqrt`` are computed in float32 and rounded to ``dtype``:
    float32 has at least ``2p + 2`` bits for both 16-bit formats, so that double rounding is the
    correctly rounded result. ``fma`` is :func:`_half_fma`; ``rsqrt`` is ``1 / sqrt`` in float32
    (two roundings, as for float32).
    """
    if _IEEE_OP[m.name] == "fma":
        return _half_fma(m.dtype, *m.args)
    return _in_f32(m.dtype, lambda *wide: _cpu_nearest(MathOp(m.name, m.mode, m.loc, "float32", list(wide)), language),
                   *m.args)


def refuse_c_vectors(func: tirx.PrimFunc) -> None:
    """Raise a clear :class:`LoweringError` for vector values on target ``c``.

    TVM's C code generator prints vector values in OpenCL syntax (``float2(a, b)``, ``v.s0``),
    which no C compiler takes; LLVM and CUDA lower them.
    """
    found = []

    def on_vector(node):
        if not found:
            found.append(node)
        return node

    tvm_ffi.structural_map(func.body, [((tirx.Ramp, tirx.Broadcast, tirx.Shuffle), on_vector)])
    if found:
        attrs = func.attrs if func.attrs is not None else {}
        where = str(attrs.get("tl.source_location", "")) or "<unknown>"
        raise LoweringError(
            f"{where}: the kernel computes with vector values ({found[0].ty.dtype}: T.Ramp indices, "
            "float16x2-style dtypes, T.add2 & co.), which target 'c' cannot express (TVM's C code "
            "generator prints OpenCL vector syntax); lower it for 'llvm' or 'cuda', or write it per lane"
        )


def _without_storage_syncs(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` without the ``T.tvm_storage_sync(...)`` statements a kernel writes itself (TVM's
    name of ``__syncthreads()``): a CPU block runs as one thread, as for ``T.sync_threads()``. TVM's
    LLVM code generator stopped on them with "not implemented", at the kernel's ``def``."""

    def on_evaluate(stmt: Any) -> Any:
        value = stmt.value
        if isinstance(value, tvm.ir.Call) and getattr(value.op, "name", "") == "tirx.tvm_storage_sync":
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        return stmt

    body = tvm_ffi.structural_map(func.body, [(tirx.Evaluate, on_evaluate)])
    return func if body.same_as(func.body) else func.with_body(body)


def lower_cpu_intrinsics(func: tirx.PrimFunc, language: str) -> tirx.PrimFunc:
    """Replace the markers of a CPU function (``language``: ``"c"`` or ``"llvm"``).

    For ``"c"`` vector values are refused first (:func:`refuse_c_vectors`).
    """
    if language == "c":
        refuse_c_vectors(func)
    func = _without_storage_syncs(func)
    if not contains_intrinsics(func.body):
        return func
    helpers: dict[str, tuple] = {}

    def on_evaluate(stmt):
        m = parse(stmt.value)
        if m is not None and m.name == "dp4a":
            return _dp4a_store(m)
        lowered = warp.lower_cpu_statement(m, language) if m is not None else None
        if m is not None and lowered is None:
            lowered = pdl.lower_cpu_statement(m)  # T.pdl_*: CPU launches are serialized (lowering/pdl.py)
        return stmt if lowered is None else lowered  # barriers: nothing to do in a one-thread CPU block

    def on_call(call):
        m = parse(call)
        if m is None:
            return call
        warp.lower_cpu_call(m)
        pdl.refuse_as_value(m)
        if m.name in _GPU_ONLY:
            public = _PUBLIC_NAME.get(m.name, m.name)
            raise LoweringError(
                f"{m.loc}: T.{public} is a GPU intrinsic (warps, thread indices, the read-only cache); CPU "
                f"targets ({language}) have none. Lower this kernel for cuda, or write the CPU version without it"
            )
        if m.name == "dp4a":
            raise LoweringError(f"{m.loc}: T.dp4a must be a statement of its own (it updates C)")
        if m.name in _FAST:
            return _in_f32(m.dtype, _precise(m.name), m.args[0])
        if m.name == "fast_rcp":
            return _in_f32(m.dtype, lambda x: tirx.FloatImm(str(x.ty.dtype), 1.0) / x, m.args[0])
        if m.name in _IEEE_OP:
            if m.dtype in ("float16", "bfloat16"):
                return _ieee_16bit_in_wider(m, language)  # the language allows "rn" only
            if m.mode == "rn":
                return _cpu_nearest(m, language)
            op = _IEEE_OP[m.name]
            sfx = "f32" if m.dtype == "float32" else "f64"
            name = f"tl_ieee_{op}_{m.mode}_{sfx}"
            helpers[name] = (op, m.dtype, m.mode)
            return tirx.call_extern(m.dtype, name, *m.args)
        raise LoweringError(f"{m.loc}: internal error: unknown intrinsic marker {m.name}")

    body = checked_map(func.body, [(tirx.Evaluate, on_evaluate)], order="pre")
    body = checked_map(body, [(tvm.ir.Call, on_call)])
    if helpers:
        if language == "llvm":
            text = _LL_DECLS + "".join(_ll_directed(n, *helpers[n]) for n in sorted(helpers))
            body = with_import(body, "pragma_import_llvm", text)
        else:
            text = c_definitions("\n/* tilelang IEEE directed rounding */\n#include <math.h>\n",
                                 (_c_directed(n, *helpers[n]) for n in sorted(helpers)))
            body = with_import(body, "pragma_import_c", text)
    return func.with_body(body)


# --------------------------------------------------------------------------------------------
# GPU (CUDA)
# --------------------------------------------------------------------------------------------

_CU_IEEE_F32 = {"add": "__fadd_{m}", "sub": "__fsub_{m}", "mul": "__fmul_{m}", "div": "__fdiv_{m}",
                "rcp": "__frcp_{m}", "sqrt": "__fsqrt_{m}", "fma": "__fmaf_{m}", "rsqrt": "__frsqrt_rn"}
_CU_IEEE_F64 = {"add": "__dadd_{m}", "sub": "__dsub_{m}", "mul": "__dmul_{m}", "div": "__ddiv_{m}",
                "rcp": "__drcp_{m}", "sqrt": "__dsqrt_{m}", "fma": "__fma_{m}"}
#: cuda_fp16.h / cuda_bf16.h, which have round-to-nearest forms only.
_CU_IEEE_HALF = {"add": "__hadd_rn", "sub": "__hsub_rn", "mul": "__hmul_rn", "div": "__hdiv", "rcp": "hrcp",
                 "sqrt": "hsqrt", "fma": "__hfma", "rsqrt": "hrsqrt"}
_CU_HELPERS = {
    "dp4a": "__device__ __forceinline__ int tl_dp4a(const void* a, const void* b, int c) "
    "{ int x, y; memcpy(&x, a, 4); memcpy(&y, b, 4); return __dp4a(x, y, c); }\n",
    "match_all_sync": "__device__ __forceinline__ unsigned int tl_match_all_sync(unsigned int mask, "
    "unsigned long long v) { int pred; return __match_all_sync(mask, v, &pred); }\n",
    "ballot_sync": "__device__ __forceinline__ unsigned long long tl_ballot_sync(unsigned int mask, int p) "
    "{ return (unsigned long long)__ballot_sync(mask, p); }\n",
    "activemask": "__device__ __forceinline__ unsigned long long tl_activemask() "
    "{ return (unsigned long long)__activemask(); }\n",
}


def lower_gpu_intrinsics(body: Any, kind: str, location: str, native_bf16: bool = True) -> Any:
    """Replace the markers of a GPU function body by CUDA intrinsics.

    ``native_bf16``: the GPU has bfloat16 arithmetic (sm_80 and later); without it, TVM computes
    bfloat16 in float32 and the bfloat16 IEEE operations are computed that way too.
    """
    if not contains_intrinsics(body):
        return body
    if kind != "cuda":
        raise LoweringError(f"{location}: TileLang intrinsics (fast math, IEEE rounding, warp votes, ...) are "
                            f"supported on cuda and CPU targets, not on {kind} yet")
    used: set = set()

    def on_evaluate(stmt):
        m = parse(stmt.value)
        if m is not None and m.name == "dp4a":
            used.add("dp4a")
            c = m.args[2].args[0]
            value = tirx.call_extern("int32", "tl_dp4a", m.args[0], m.args[1], c)
            return tirx.BufferStore(c.source, value, list(c.indices))
        lowered = warp.lower_gpu_statement(m, used) if m is not None else None
        if m is not None and lowered is None:
            lowered = pdl.lower_gpu_statement(m, used)  # T.pdl_trigger / T.pdl_sync (lowering/pdl.py)
        if m is not None and lowered is None:
            lowered = tma_atomics.lower_gpu_statement(m, used)  # use_tma=True (lowering/tma_atomics.py)
        return stmt if lowered is None else lowered  # barriers (lowering/warp.py)

    def on_call(call):
        m = parse(call)
        if m is None:
            return call
        a = m.args
        if m.name in _FAST:
            if m.dtype == "float32":
                return tirx.call_pure_extern("float32", m.name + "f", a[0])
            return _in_f32(m.dtype, getattr(tirx, _FAST[m.name]), a[0]) if m.dtype != "float64" else getattr(tirx, _FAST[m.name])(a[0])
        if m.name == "fast_rcp":
            if m.dtype == "float32":
                return tirx.call_pure_extern("float32", "__fdividef", tirx.FloatImm("float32", 1.0), a[0])
            return _in_f32(m.dtype, lambda x: tirx.FloatImm(str(x.ty.dtype), 1.0) / x, a[0])
        if m.name in _IEEE_OP:
            op = _IEEE_OP[m.name]
            if m.dtype == "float16" or (m.dtype == "bfloat16" and native_bf16):  # "rn" only (the language checks)
                return tirx.call_pure_extern(m.dtype, _CU_IEEE_HALF[op], *a)
            if m.dtype == "bfloat16":
                return _ieee_16bit_in_wider(m, "cuda")
            table = _CU_IEEE_F32 if m.dtype == "float32" else _CU_IEEE_F64
            if op not in table:
                if op == "rsqrt":
                    one = tirx.FloatImm("float64", 1.0)
                    return tirx.call_pure_extern("float64", "__ddiv_rn", one, tirx.call_pure_extern("float64", "__dsqrt_rn", a[0]))
                raise LoweringError(f"{m.loc}: T.{m.name} has no {m.dtype} CUDA intrinsic")
            return tirx.call_pure_extern(m.dtype, table[op].format(m=m.mode), *a)
        if m.name in ("any_sync", "all_sync"):
            return tirx.call_extern("int32", f"__{m.name}", a[0], a[1])
        if m.name in ("ballot_sync", "activemask", "match_all_sync"):
            used.add(m.name)
            return tirx.call_extern(m.dtype, f"tl_{m.name}", *a)
        if m.name.startswith("syncthreads_"):
            return tirx.call_extern("int32", f"__{m.name}", a[0])
        if m.name in ("shfl_sync", "shfl_xor", "shfl_down", "shfl_up"):
            fn = "__shfl_sync" if m.name == "shfl_sync" else f"__{m.name}_sync"
            return tirx.call_extern(m.dtype, fn, a[0], a[1], a[2], a[3])
        if m.name == "match_any_sync":
            return tirx.call_extern("uint32", "__match_any_sync", a[0], a[1])
        if m.name == "__ldg":
            return tirx.call_extern(m.dtype, "__ldg", a[0])
        if m.name == "__ffs":
            wide = tvm.runtime.DataType(str(a[0].ty.dtype)).bits == 64
            return tirx.call_extern("int32", "__ffsll" if wide else "__ffs", a[0])
        if m.name == "__fns":
            return tirx.call_extern("uint32", "__fns", a[0], a[1], a[2])
        if m.name in ("thread_binding", "block_binding"):
            raise LoweringError(f"{m.loc}: T.{_PUBLIC_NAME[m.name]}() must be used inside a T.Kernel")
        pdl.refuse_as_value(m)
        lowered = tma_atomics.lower_gpu_call(m, used)
        if lowered is None:
            lowered = warp.lower_gpu_call(m, used)  # warp reductions (lowering/warp.py)
        if lowered is not None:
            return lowered
        raise LoweringError(f"{m.loc}: internal error: unknown intrinsic marker {m.name}")

    body = checked_map(body, [(tirx.Evaluate, on_evaluate)], order="pre")
    body = checked_map(body, [(tvm.ir.Call, on_call)])
    if not used:
        return body
    text = f"\n{CUDA_HELPERS_BEGIN}\n" + "".join(
        f"#ifndef TL_INTRINSIC_{n.upper()}\n#define TL_INTRINSIC_{n.upper()}\n{_CU_HELPERS.get(n) or warp.cuda_helper(n) or pdl.cuda_helper(n) or tma_atomics.cuda_helper(n)}#endif\n"
        for n in sorted(used)
    ) + f"{CUDA_HELPERS_END}\n"
    return with_import_in_first_kernel(body, text)[0]
