"""Atomic marker calls -> real atomics of the target.

The atomic operators (:mod:`tilelang_core.language.tileops.atomic`) leave one marker call per
element operation: ``call_extern(dtype, "tl.atomic", op, order, loc, address_of(dst[i]), *values)``
whose value is the element before the operation. This module replaces each marker by a call of
a small helper function ``tl_atomic_<op>_<dtype>_<order>`` and puts the helpers' definitions into
the generated code through TVM's ``pragma_import_c`` / ``pragma_import_llvm`` attributes (text
that TVM's code generators emit at file level / link into the LLVM module, where the helpers are
inlined):

* **C** (target ``c``; C99 and C++, since TVM-built C modules are compiled as C++): GCC/Clang
  ``__atomic`` builtins (the C11 memory model): ``__atomic_fetch_add/or/and/xor`` for integer
  add and bitwise operations, a ``__atomic_compare_exchange`` loop for floats and for max/min.
* **LLVM** (target ``llvm``): ``atomicrmw add/fadd/max/umax/fmax/...`` instructions,
  ``load atomic``/``store atomic``; bfloat16 as a ``cmpxchg`` loop on the 16-bit word.
* **CUDA**: ``atomicAdd``/``atomicMax``/``atomicOr``/... where the hardware has them, an
  ``atomicCAS`` loop otherwise (float max/min, 16-bit floats on the enclosing 32-bit word);
  memory orders other than relaxed add ``__threadfence()`` before and/or after.

16-bit floats are updated as the 16-bit value: the arithmetic is done in float32 and rounded
once (round to nearest even), which is the result of the 16-bit operation. float max/min follow
C's ``fmax``/``fmin`` (a NaN operand is ignored unless both are NaN).

On GPU targets an atomic whose destination is in per-thread (``local``) memory is a plain
read-modify-write (no other thread can see that element).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.tileops._common import collect
from .access_ptr import element_offset
from .markers import marker_call_args
from .source_imports import c_definitions, with_import, with_import_in_first_kernel

#: Callee name of the marker calls (same as ``tilelang_core.language.tileops.atomic.ATOMIC_CALL``).
ATOMIC_CALL = "tl.atomic"

_SUFFIX = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int32": "i32",
    "uint32": "u32",
    "int64": "i64",
    "uint64": "u64",
}
_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "int32": 32, "uint32": 32, "int64": 64, "uint64": 64}
_RMW_OPS = ("add", "max", "min", "or", "and", "xor")


@dataclass
class AtomicOp:
    """One parsed marker call."""

    op: str
    order: str
    loc: str
    dtype: str
    ptr: Any
    values: list
    call: Any

    @property
    def load(self) -> Any:
        """The ``dst[i]`` load inside ``address_of``."""
        return self.ptr.args[0]

    @property
    def buffer(self) -> Any:
        return self.load.source

    @property
    def scope(self) -> str:
        return str(self.buffer.ty.storage_scope) or "global"


def parse(expr: Any) -> Optional[AtomicOp]:
    """The :class:`AtomicOp` of a marker call, else None."""
    args = marker_call_args(expr, ATOMIC_CALL)
    if args is None or len(args) < 4:
        return None
    return AtomicOp(
        op=args[0].value,
        order=args[1].value,
        loc=args[2].value,
        dtype=str(expr.ty.dtype),
        ptr=args[3],
        values=args[4:],
        call=expr,
    )


def checked_map(node: Any, entries: list, order: str = "post") -> Any:
    """``tvm_ffi.structural_map`` whose callbacks may raise :class:`LoweringError`: the first
    such error is raised as itself after the walk (not wrapped by the FFI boundary)."""
    errors: list = []

    def guard(fn):
        def call(x):
            if errors:
                return x
            try:
                return fn(x)
            except LoweringError as exc:
                errors.append(exc)
                return x

        return call

    result = tvm_ffi.structural_map(node, [(kinds, guard(fn)) for kinds, fn in entries], order=order)
    if errors:
        raise errors[0]
    return result


def atomic_calls(node: Any) -> list:
    """The atomic marker calls in a statement or expression, outer ones before the ones in their operands."""
    return [call for call in collect(node, tvm.ir.Call) if parse(call) is not None]


def contains_atomics(node: Any) -> bool:
    """Whether a statement or expression contains an atomic marker call."""
    return bool(atomic_calls(node))


def _vector_prev_lanes(a: AtomicOp) -> int:
    """The lane count of an ``addx2_prev``/``addx4_prev`` marker, else 0."""
    if a.op.startswith("addx") and a.op.endswith("_prev"):
        return int(a.op[len("addx") : -len("_prev")])
    return 0


def _vector_prev_error(a: AtomicOp, lanes: int, target: str) -> LoweringError:
    if target in ("c", "llvm"):
        return LoweringError(
            f"{a.loc}: T.atomic_addx{lanes}(..., return_prev=True) is not supported on CPU targets "
            f"({target}), as in TileLang: lower it for cuda, or read the previous values per element with "
            "T.atomic_add(dst[i], v, return_prev=True)"
        )
    return LoweringError(
        f"{a.loc}: T.atomic_addx{lanes}(..., return_prev=True) returns {lanes} values: store them into "
        f"{lanes} consecutive elements (P[j:j + {lanes}] = T.atomic_addx{lanes}(...))"
    )


def expand_vector_prev(body: Any, target: str) -> Any:
    """``P[j:j+n] = T.atomic_addx<n>(D[i:i+n], V[k:k+n], return_prev=True)`` as ``n`` element stores
    (GPU targets; CPU targets refuse every vector marker in :func:`_refuse`, as TileLang does).

    Each lane becomes its own ``add`` marker (one atomic per element, as without
    ``return_prev``) whose previous value is stored into the lane of ``P``; the target then
    lowers those markers like any other. A vector marker anywhere else is refused by
    :func:`_refuse` with the operator's line.
    """

    def on_store(stmt):
        a = parse(stmt.value)
        lanes = _vector_prev_lanes(a) if a is not None else 0
        if not lanes:
            return stmt
        ramp = list(stmt.indices)[-1] if len(stmt.indices) else None
        if type(ramp).__name__ != "Ramp" or int(ramp.lanes) != lanes:
            raise _vector_prev_error(a, lanes, target)
        scalar = str(tvm.runtime.DataType(a.dtype).with_lanes(1))
        load = a.load
        stores = []
        for k in range(lanes):
            idx = list(load.indices)
            idx[-1] = idx[-1] + k if k else idx[-1]
            lane_ptr = tirx.address_of(tirx.BufferLoad(load.source, idx))
            marker = tirx.call_extern(
                scalar, ATOMIC_CALL, tvm.ir.StringImm("add"), tvm.ir.StringImm(a.order), tvm.ir.StringImm(a.loc),
                lane_ptr, a.values[k],
            )
            out_idx = list(stmt.indices[:-1]) + [ramp.base + ramp.stride * k if k else ramp.base]
            stores.append(tirx.BufferStore(stmt.buffer, marker, out_idx))
        return tirx.SeqStmt(stores)

    return checked_map(body, [(tirx.BufferStore, on_store)])


def _refuse(a: AtomicOp, target: str) -> None:
    """Markers no target lowers (reported with the statement's line). ``add_tma`` markers
    (``use_tma=True``) reach this module only where the target has TMA: ``lower`` refuses them
    for every other target first (:func:`tilelang_core.lowering.tma_atomics.check_target`)."""
    lanes = _vector_prev_lanes(a)
    if lanes:  # a CPU target, or on a GPU one left by expand_vector_prev: not the value of a store
        raise _vector_prev_error(a, lanes, target)


def helper_name(a: AtomicOp) -> str:
    """``tl_atomic_<op>_<dtype suffix>_<order>``."""
    op = "add" if a.op == "add_tma" else a.op
    return f"tl_atomic_{op}_{_SUFFIX[a.dtype]}_{a.order}"


def _helper_call(a: AtomicOp, name: str) -> Any:
    return tirx.call_extern(a.dtype, name, a.ptr, *a.values)


# --------------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------------


def _hoist_bf16(stmt: Any, language: str, used: dict, widened: bool = True) -> Any:
    """A statement with bfloat16 markers, preceded by statements that carry the values as float32.

    TVM's bfloat16 legalization converts neither values inside extern calls nor ``Bind`` values,
    so every bfloat16 operand is stored as float32 into a one-element local buffer, the helper
    (float32 in, float32 out) stores its result into another, and the marker becomes
    ``bfloat16(prev[0])``. ``widened``: the target computes bfloat16 in float32 (TVM's
    ``BF16ComputeLegalize``: CPU targets, CUDA before sm_80); the destination is then passed as
    in :func:`_bf16_word`.
    """
    from .atomic_values import conditional_calls

    prefix: list = []
    branches = conditional_calls(stmt)

    def on_call(call):
        a = parse(call)
        if a is None or a.dtype != "bfloat16":
            return call
        if a.op != "load" and any(call.same_as(c) for c in branches):  # a load changes nothing
            # hoisted in front of the statement, it would run whether or not its branch does
            raise LoweringError(
                f"{a.loc}: a bfloat16 atomic in a branch that may not run (an arm of T.if_then_else or of a "
                "select, the right operand of and/or) is not supported: it would run every time. Write the "
                "branch as an if statement with the atomic in its own statement"
            )
        _refuse(a, language)
        if language == "cuda" and a.scope == "local":
            _no_local_prev(a)
        name = helper_name(a)
        used.setdefault(name, a)
        args = []
        for value in a.values:
            arg = _scalar_slot("atomic_arg", prefix)
            prefix.append(tirx.BufferStore(arg, tirx.Cast("float32", value), [0]))
            args.append(arg[0])
        prev = _scalar_slot("atomic_prev", prefix)
        prefix.append(tirx.BufferStore(prev, tirx.call_extern("float32", name, _bf16_word(a) if widened else a.ptr, *args), [0]))
        return tirx.Cast("bfloat16", prev[0])

    if isinstance(stmt, tirx.Evaluate) and (a := parse(stmt.value)) is not None and a.dtype == "bfloat16":
        checked_map(stmt, [(tvm.ir.Call, on_call)])  # fills prefix
        last = prefix.pop()  # the store of the unused previous value: call for the effect only
        prefix.pop()  # its AllocBuffer
        return tirx.SeqStmt(prefix + [tirx.Evaluate(last.value)])
    new = checked_map(stmt, [(tvm.ir.Call, on_call)])
    return tirx.SeqStmt(prefix + [new]) if prefix else new


def _bf16_word(a: AtomicOp) -> Any:
    """The address of a bfloat16 destination as a pointer to its 16-bit word.

    TVM's ``BF16ComputeLegalize`` stores a bfloat16 buffer that the kernel allocates (a shared,
    local or fragment tile, a ``T.alloc_global`` workspace) as float32, unless its data pointer is
    used as a plain handle. ``address_of(S[i])`` is no such use, so the helper, which updates a
    16-bit word, was handed a float32 element (it changed half of it: the tile kept its values).
    ``tvm_access_ptr`` names the data pointer, which keeps the buffer's 16-bit storage.
    """
    load = a.load
    buf = load.source
    return tirx.call_intrin(
        "handle",
        tvm.ir.Op.get("tirx.tvm_access_ptr"),
        tirx.type_annotation("uint16"),  # the storage type: TVM rewrites a bfloat16 annotation to float32
        buf.data,
        element_offset(buf, list(load.indices)),
        tirx.IntImm("int32", 1),
        tirx.IntImm("int32", 3),
    )


def _scalar_slot(name: str, prefix: list) -> Any:
    """A one-element float32 local buffer, allocated by a statement appended to ``prefix``."""
    buf = tirx.decl_buffer([1], "float32", name=name, scope="local")
    prefix.append(tirx.AllocBuffer(buf))
    return buf


def _has_bf16_marker(node: Any) -> bool:
    found = []

    def on_call(call):
        a = parse(call)
        if a is not None and a.dtype == "bfloat16":
            found.append(a)
        return call

    tvm_ffi.structural_map(node, [(tvm.ir.Call, on_call)])
    return bool(found)


def lower_cpu_atomics(func: tirx.PrimFunc, language: str) -> tirx.PrimFunc:
    """Replace the markers of a CPU function by helper calls; ``language`` is ``"c"`` or ``"llvm"``."""
    used: dict[str, AtomicOp] = {}

    def on_stmt(stmt):
        return _hoist_bf16(stmt, language, used) if _has_bf16_marker(stmt) else stmt

    body = checked_map(func.body, [((tirx.BufferStore, tirx.Evaluate, tirx.Bind), on_stmt)], order="pre")

    def on_call(call):
        a = parse(call)
        if a is None:
            return call
        if a.dtype == "bfloat16":
            raise LoweringError(
                f"{a.loc}: a bfloat16 atomic can only be used in a statement of its own or as the value stored "
                "by an assignment on CPU targets (here it sits in a loop bound or a condition)"
            )
        _refuse(a, language)
        name = helper_name(a)
        used.setdefault(name, a)
        return _helper_call(a, name)

    body = checked_map(body, [(tvm.ir.Call, on_call)])
    if not used:
        return func
    if language == "llvm":
        text = llvm_helpers(used)
        key = "pragma_import_llvm"
    else:
        text = c_helpers(used)
        key = "pragma_import_c"
    return func.with_body(with_import(body, key, text))


_C_TYPE = {
    "float16": "half",
    "bfloat16": "uint16_t",
    "float32": "float",
    "float64": "double",
    "int32": "int32_t",
    "uint32": "uint32_t",
    "int64": "int64_t",
    "uint64": "uint64_t",
}
_C_ORDER = {
    "relaxed": "__ATOMIC_RELAXED",
    "consume": "__ATOMIC_CONSUME",
    "acquire": "__ATOMIC_ACQUIRE",
    "release": "__ATOMIC_RELEASE",
    "acq_rel": "__ATOMIC_ACQ_REL",
    "seq_cst": "__ATOMIC_SEQ_CST",
}
#: The order of the loads of a read-modify-write (no release part; C11 forbids it on loads).
_LOAD_PART = {"relaxed": "relaxed", "consume": "consume", "acquire": "acquire", "release": "relaxed", "acq_rel": "acquire", "seq_cst": "seq_cst"}

_C_BF16 = r"""
#ifndef TL_ATOMIC_BF16_CONVERSIONS
#define TL_ATOMIC_BF16_CONVERSIONS
static inline float tl_atomic_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t tl_atomic_f32_to_bf16(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
#endif
"""


def _c_combine(op: str, dtype: str, old: str, v: str) -> str:
    if op == "add":
        return f"{old} + {v}"
    if dtype in ("float32", "float16", "bfloat16"):
        return f"f{op}f({old}, {v})" if dtype == "float32" else f"({_C_TYPE[dtype] if dtype == 'float16' else 'float'})f{op}f((float){old}, (float){v})"
    if dtype == "float64":
        return f"f{op}({old}, {v})"
    cmp = ">" if op == "max" else "<"
    return f"({v} {cmp} {old} ? {v} : {old})"


def _c_helper(name: str, a: AtomicOp) -> str:
    t = _C_TYPE[a.dtype]
    order = _C_ORDER[a.order]
    lorder = _C_ORDER[_LOAD_PART[a.order]]
    op = "add" if a.op == "add_tma" else a.op
    if a.dtype == "bfloat16":
        if op == "load":
            return f"static inline float {name}(void* p) {{ return tl_atomic_bf16_to_f32(__atomic_load_n((uint16_t*)p, {order})); }}\n"
        if op == "store":
            return f"static inline float {name}(void* p, float v) {{ __atomic_store_n((uint16_t*)p, tl_atomic_f32_to_bf16(v), {order}); return v; }}\n"
        comb = "of + v" if op == "add" else f"f{op}f(of, v)"
        return (
            f"static inline float {name}(void* vp, float v) {{\n"
            "  uint16_t* p = (uint16_t*)vp;\n"
            f"  uint16_t old = __atomic_load_n(p, {lorder});\n"
            "  for (;;) {\n"
            "    float of = tl_atomic_bf16_to_f32(old);\n"
            f"    uint16_t next = tl_atomic_f32_to_bf16({comb});\n"
            "    if (next == old) return of;\n"
            f"    if (__atomic_compare_exchange_n(p, &old, next, 1, {order}, {lorder})) return of;\n"
            "  }\n"
            "}\n"
        )
    if op == "load":
        return f"static inline {t} {name}({t}* p) {{ {t} r; __atomic_load(p, &r, {order}); return r; }}\n"
    if op == "store":
        return f"static inline {t} {name}({t}* p, {t} v) {{ __atomic_store(p, &v, {order}); return v; }}\n"
    integer = a.dtype.startswith(("int", "uint"))
    if integer and op in ("add", "or", "and", "xor"):
        return f"static inline {t} {name}({t}* p, {t} v) {{ return __atomic_fetch_{op}(p, v, {order}); }}\n"
    same = "    if (next == old) return old;\n" if op in ("max", "min") else ""
    return (
        f"static inline {t} {name}({t}* p, {t} v) {{\n"
        f"  {t} old; __atomic_load(p, &old, {lorder});\n"
        "  for (;;) {\n"
        f"    {t} next = {_c_combine(op, a.dtype, 'old', 'v')};\n"
        f"{same}"
        f"    if (__atomic_compare_exchange(p, &old, &next, 1, {order}, {lorder})) return old;\n"
        "  }\n"
        "}\n"
    )


def c_helpers(used: dict) -> str:
    """C text (C99 and C++) defining the helpers in ``used`` (name -> AtomicOp)."""
    bf16 = [_C_BF16] if any(a.dtype == "bfloat16" for a in used.values()) else []
    return c_definitions(
        "\n/* tilelang atomics (GCC/Clang __atomic builtins) */\n#include <math.h>\n#include <stdint.h>\n",
        [*bf16, *(_c_helper(name, used[name]) for name in sorted(used))],
    )


_LL_TYPE = {"float16": "half", "float32": "float", "float64": "double", "int32": "i32", "uint32": "i32", "int64": "i64", "uint64": "i64"}
_LL_ORDER = {"relaxed": "monotonic", "consume": "acquire", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel", "seq_cst": "seq_cst"}
_LL_FAIL = {"relaxed": "monotonic", "consume": "acquire", "acquire": "acquire", "release": "monotonic", "acq_rel": "acquire", "seq_cst": "seq_cst"}

_LL_BF16 = """
define internal float @tl_atomic_bf16_to_f32(i16 %b) {
  %w = zext i16 %b to i32
  %s = shl i32 %w, 16
  %f = bitcast i32 %s to float
  ret float %f
}
define internal i16 @tl_atomic_f32_to_bf16(float %f) {
  %u = bitcast float %f to i32
  %abs = and i32 %u, 2147483647
  %isnan = icmp ugt i32 %abs, 2139095040
  %hi = lshr i32 %u, 16
  %lsb = and i32 %hi, 1
  %bias = add i32 %lsb, 32767
  %r = add i32 %u, %bias
  %rh = lshr i32 %r, 16
  %qn = or i32 %hi, 64
  %sel = select i1 %isnan, i32 %qn, i32 %rh
  %t = trunc i32 %sel to i16
  ret i16 %t
}
declare float @llvm.maxnum.f32(float, float)
declare float @llvm.minnum.f32(float, float)
"""


def _ll_helper(name: str, a: AtomicOp) -> str:
    order = _LL_ORDER[a.order]
    op = "add" if a.op == "add_tma" else a.op
    if a.dtype == "bfloat16":
        if op == "load":
            lo = "acquire" if a.order == "consume" else order
            return (
                f"define float @{name}(ptr %p) {{\n  %b = load atomic i16, ptr %p {lo}, align 2\n"
                "  %f = call float @tl_atomic_bf16_to_f32(i16 %b)\n  ret float %f\n}\n"
            )
        if op == "store":
            return (
                f"define float @{name}(ptr %p, float %v) {{\n  %b = call i16 @tl_atomic_f32_to_bf16(float %v)\n"
                f"  store atomic i16 %b, ptr %p {order}, align 2\n  ret float %v\n}}\n"
            )
        comb = {"add": "fadd float %of, %v", "max": "call float @llvm.maxnum.f32(float %of, float %v)",
                "min": "call float @llvm.minnum.f32(float %of, float %v)"}[op]
        fail = _LL_FAIL[a.order]
        return (
            f"define float @{name}(ptr %p, float %v) {{\n"
            "entry:\n"
            f"  %init = load atomic i16, ptr %p {fail}, align 2\n"
            "  br label %loop\n"
            "loop:\n"
            "  %old = phi i16 [ %init, %entry ], [ %seen, %retry ]\n"
            "  %of = call float @tl_atomic_bf16_to_f32(i16 %old)\n"
            f"  %nf = {comb}\n"
            "  %next = call i16 @tl_atomic_f32_to_bf16(float %nf)\n"
            "  %same = icmp eq i16 %next, %old\n"
            "  br i1 %same, label %done, label %swap\n"
            "swap:\n"
            f"  %pair = cmpxchg weak ptr %p, i16 %old, i16 %next {order} {fail}, align 2\n"
            "  %seen = extractvalue { i16, i1 } %pair, 0\n"
            "  %ok = extractvalue { i16, i1 } %pair, 1\n"
            "  br i1 %ok, label %done, label %retry\n"
            "retry:\n"
            "  br label %loop\n"
            "done:\n"
            "  ret float %of\n"
            "}\n"
        )
    t = _LL_TYPE[a.dtype]
    align = _BITS[a.dtype] // 8
    if op == "load":
        lo = "acquire" if a.order == "consume" else order
        return f"define {t} @{name}(ptr %p) {{\n  %r = load atomic {t}, ptr %p {lo}, align {align}\n  ret {t} %r\n}}\n"
    if op == "store":
        return f"define {t} @{name}(ptr %p, {t} %v) {{\n  store atomic {t} %v, ptr %p {order}, align {align}\n  ret {t} %v\n}}\n"
    floating = a.dtype.startswith("float")
    unsigned = a.dtype.startswith("uint")
    if floating:
        inst = {"add": "fadd", "max": "fmax", "min": "fmin"}[op]
    elif op in ("max", "min"):
        inst = ("u" if unsigned else "") + op
    else:
        inst = op
    return f"define {t} @{name}(ptr %p, {t} %v) {{\n  %old = atomicrmw {inst} ptr %p, {t} %v {order}, align {align}\n  ret {t} %old\n}}\n"


def llvm_helpers(used: dict) -> str:
    """LLVM IR text defining the helpers in ``used`` (TVM links it into the module and inlines it)."""
    parts = []
    if any(a.dtype == "bfloat16" for a in used.values()):
        parts.append(_LL_BF16)
    for name in sorted(used):
        parts.append(_ll_helper(name, used[name]))
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# GPU (CUDA)
# --------------------------------------------------------------------------------------------

_CU_TYPE = {
    "float16": "__half",
    "bfloat16": "float",  # carried as float32 (see _hoist_bf16), stored as 16 bits
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
}
#: How CUDA's atomic functions take each integer type (int64 goes through unsigned long long).
_CU_NATIVE = {"int32": "int", "uint32": "unsigned int", "int64": "unsigned long long", "uint64": "unsigned long long", "float32": "float", "float64": "double"}

_CU_COMMON = r"""
#ifndef TL_ATOMIC_CUDA_COMMON
#define TL_ATOMIC_CUDA_COMMON
__device__ __forceinline__ float tl_atomic_bf16_to_f32(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
__device__ __forceinline__ unsigned short tl_atomic_f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
// Update the 16-bit value at p through a CAS loop on its enclosing 32-bit word; returns the old bits.
template <class F> __device__ __forceinline__ unsigned short tl_atomic_update16(void* p, F f) {
  unsigned int* word = (unsigned int*)((unsigned long long)p & ~3ull);
  unsigned int shift = (unsigned int)(((unsigned long long)p & 2ull) * 8ull);
  unsigned int old = *(volatile unsigned int*)word, assumed;
  do {
    assumed = old;
    unsigned short cur = (unsigned short)(assumed >> shift);
    unsigned short nxt = f(cur);
    if (nxt == cur) break;
    unsigned int repl = (assumed & ~(0xffffu << shift)) | ((unsigned int)nxt << shift);
    old = atomicCAS(word, assumed, repl);
  } while (old != assumed);
  return (unsigned short)(assumed >> shift);
}
#endif
"""


def _cu_fences(order: str) -> tuple[str, str]:
    before = "__threadfence(); " if order in ("release", "acq_rel", "seq_cst") else ""
    after = "__threadfence(); " if order in ("consume", "acquire", "acq_rel", "seq_cst") else ""
    return before, after


def _cu_helper(name: str, a: AtomicOp) -> str:
    t = _CU_TYPE[a.dtype]
    op = "add" if a.op == "add_tma" else a.op
    before, after = _cu_fences(a.order)
    head = f"__device__ __forceinline__ {t} {name}(void* p"
    if a.dtype == "bfloat16":
        if op == "load":
            return f"{head}) {{ float r = tl_atomic_bf16_to_f32(*(volatile unsigned short*)p); {after}return r; }}\n"
        if op == "store":
            return f"{head}, float v) {{ {before}*(volatile unsigned short*)p = tl_atomic_f32_to_bf16(v); {after}return v; }}\n"
        comb = {"add": "a + v", "max": "fmaxf(a, v)", "min": "fminf(a, v)"}[op]
        return (
            f"{head}, float v) {{\n  {before}unsigned short old = tl_atomic_update16(p, [=] (unsigned short c) {{ "
            f"float a = tl_atomic_bf16_to_f32(c); return tl_atomic_f32_to_bf16({comb}); }});\n"
            f"  {after}return tl_atomic_bf16_to_f32(old);\n}}\n"
        )
    if a.dtype == "float16":
        if op == "load":
            return f"{head}) {{ {t} r = __ushort_as_half(*(volatile unsigned short*)p); {after}return r; }}\n"
        if op == "store":
            return f"{head}, {t} v) {{ {before}*(volatile unsigned short*)p = __half_as_ushort(v); {after}return v; }}\n"
        if op == "add":
            native = "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700\n  {before}{t} r = atomicAdd((__half*)p, v); {after}return r;\n#else\n"
            native = native.format(before=before, after=after, t=t)
            tail = "#endif\n"
        else:
            native, tail = "", ""
        comb = {"add": "a + b", "max": "fmaxf(a, b)", "min": "fminf(a, b)"}[op]
        return (
            f"{head}, {t} v) {{\n{native}  {before}float b = __half2float(v);\n"
            f"  unsigned short old = tl_atomic_update16(p, [=] (unsigned short c) {{ float a = __half2float(__ushort_as_half(c)); "
            f"return __half_as_ushort(__float2half_rn({comb})); }});\n"
            f"  {after}return __ushort_as_half(old);\n{tail}}}\n"
        )
    if op == "load":
        return f"{head}) {{ {t} r = *(volatile {t}*)p; {after}return r; }}\n"
    if op == "store":
        return f"{head}, {t} v) {{ {before}*(volatile {t}*)p = v; {after}return v; }}\n"
    native = _CU_NATIVE[a.dtype]
    fn = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin", "or": "atomicOr", "and": "atomicAnd", "xor": "atomicXor"}[op]
    if a.dtype == "int64" and op in ("max", "min"):
        native = "long long"
    if a.dtype.startswith("float") and op in ("max", "min"):
        bits = "int" if a.dtype == "float32" else "unsigned long long"
        as_bits = "__float_as_int" if a.dtype == "float32" else "__double_as_longlong"
        from_bits = "__int_as_float" if a.dtype == "float32" else "__longlong_as_double"
        fm = ("fmaxf" if op == "max" else "fminf") if a.dtype == "float32" else ("fmax" if op == "max" else "fmin")
        cast_bits = "" if bits == "int" else "(unsigned long long)"
        return (
            f"{head}, {t} v) {{\n  {before}{bits}* w = ({bits}*)p;\n  {bits} old = *(volatile {bits}*)w, assumed;\n"
            f"  do {{ assumed = old; {t} nxt = {fm}({from_bits}(({'long long' if bits != 'int' else 'int'})assumed), v);\n"
            f"       {bits} nb = {cast_bits}{as_bits}(nxt); if (nb == assumed) break; old = atomicCAS(w, assumed, nb); }}"
            f" while (old != assumed);\n  {after}return {from_bits}(({'long long' if bits != 'int' else 'int'})assumed);\n}}\n"
        )
    return f"{head}, {t} v) {{ {before}{t} r = ({t}){fn}(({native}*)p, ({native})v); {after}return r; }}\n"


#: First and last line of every helper block in CUDA sources (TVM places them before its
#: preamble); atomics and intrinsics (lowering/intrinsics.py) use the same markers.
CUDA_HELPERS_BEGIN = "// tilelang helpers: begin"
CUDA_HELPERS_END = "// tilelang helpers: end"


def cuda_helpers(used: dict) -> str:
    """CUDA C++ text defining the helpers in ``used`` (placed before TVM's preamble).

    Every helper is guarded by its own macro, so the texts of several kernels can be pasted
    into one translation unit.
    """
    parts = [f"\n{CUDA_HELPERS_BEGIN}\n"]
    if any(a.dtype == "float16" for a in used.values()):
        parts.append("#include <cuda_fp16.h>\n")
    parts.append(_CU_COMMON)
    for name in sorted(used):
        guard = "TL_ATOMIC_HELPER_" + name.upper()
        parts.append(f"#ifndef {guard}\n#define {guard}\n{_cu_helper(name, used[name])}#endif\n")
    parts.append(f"{CUDA_HELPERS_END}\n")
    return "".join(parts)


def _no_local_prev(a: AtomicOp) -> None:
    raise LoweringError(
        f"{a.loc}: the previous value of an atomic on '{a.buffer}' (per-thread local memory) is not "
        "available on GPU targets; read the element before updating it"
    )


def _plain_rmw(a: AtomicOp) -> Any:
    """``dst[i] = combine(dst[i], v)`` as a statement (per-thread destinations on GPU)."""
    load = a.load
    buf, idx = load.source, list(load.indices)
    op = "add" if a.op == "add_tma" else a.op
    if op == "load":
        return tirx.Evaluate(load)
    v = a.values[0]
    if op == "store":
        return tirx.BufferStore(buf, v, idx)
    combine = {
        "add": lambda x, y: x + y,
        "max": tirx.max,
        "min": tirx.min,
        "or": tirx.bitwise_or,
        "and": tirx.bitwise_and,
        "xor": tirx.bitwise_xor,
    }[op]
    return tirx.BufferStore(buf, combine(load, v), idx)


def lower_gpu_atomics(body: Any, kind: str, location: str, native_bf16: bool = True) -> Any:
    """Replace the markers of a GPU function body (after the fragment layout) by CUDA atomics;
    ``native_bf16``: the target computes bfloat16 natively (CUDA sm_80 and later)."""
    if not contains_atomics(body):
        return body
    if kind != "cuda":
        raise LoweringError(f"{location}: atomic operators are supported on cuda and CPU targets, not on {kind} yet")
    body = expand_vector_prev(body, kind)
    used: dict[str, AtomicOp] = {}

    def on_evaluate(stmt):
        a = parse(stmt.value)
        if a is not None and a.scope == "local":
            _refuse(a, kind)
            return _plain_rmw(a)
        return stmt

    def on_call(call):
        a = parse(call)
        if a is None:
            return call
        _refuse(a, kind)
        if a.scope == "local":
            _no_local_prev(a)
        name = helper_name(a)
        used.setdefault(name, a)
        return tirx.call_extern(a.dtype, name, a.ptr, *a.values)

    def on_stmt(stmt):
        return _hoist_bf16(stmt, kind, used, not native_bf16) if _has_bf16_marker(stmt) else stmt

    body = checked_map(body, [(tirx.Evaluate, on_evaluate)], order="pre")
    body = checked_map(body, [((tirx.BufferStore, tirx.Evaluate, tirx.Bind), on_stmt)], order="pre")
    body = checked_map(body, [(tvm.ir.Call, on_call)])
    if not used:
        return body
    body, in_kernel = with_import_in_first_kernel(body, cuda_helpers(used))
    if not in_kernel:
        raise LoweringError(f"{location}: atomic operators on GPU targets must be inside a T.Kernel")
    return body
