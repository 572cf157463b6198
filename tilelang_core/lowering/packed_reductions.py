"""Packed float16/bfloat16 max/min/absmax reductions on CUDA: two lanes per instruction.

``T.reduce_max/min/absmax`` of a per-thread float16/bfloat16 tile (a ``local`` destination, a
``local`` or per-thread fragment source of the same dtype) marks its reduction loop with
:data:`~tilelang_core.language.tileops.reduce.PACKED_REDUCE`. On CUDA from sm_80 (PTX
``max/min.f16x2`` and ``.bf16x2``) :class:`PackHalfReductions` rewrites such a loop nest, once
the buffers are flat, so that one instruction handles two adjacent elements:

* **reduced dim not the last one** (``src (8, 4) -> dst (4,)`` over dim 0): the loop over the
  kept index ``j`` steps by two and the pair ``dst[j:j+2]`` is reduced over the reduced dim with
  ``tl::max2(dst[j:j+2], src[r, j:j+2])``. Each element sees the same operands in the same order
  as in the scalar code. An odd last kept index runs the scalar code.
* **reduced dim the last one** (``src (8,) -> dst (1,)``): a two-lane accumulator, started at the
  identity (-inf for max, +inf for min, 0 for absmax), takes the even elements in lane 0 and the
  odd ones in lane 1; the two lanes are then folded into ``dst`` with the scalar rule, then an
  odd last element.

Results are those of the scalar code (and of the CPU targets) except for two things the PTX
instructions define differently: a NaN result is CUDA's canonical NaN (the scalar code returns
one of the NaN operands), and max and min order signed zeros (``max(-0, +0) = +0``, ``min(-0,
+0) = -0``) where the scalar code keeps the zero it saw first. NaN rules are kept: without
``nan_propagate`` a NaN element is skipped (``__hmax2``: "the other input is returned"), a row
of only NaN gives the identity; with ``nan_propagate`` (``__hmax2_nan``) any NaN gives NaN. One
more difference when the reduced dim is the last one: with ``clear=False``, a NaN destination and
a row of only NaN give the identity (the scalar code returns NaN).

Every other target and CUDA below sm_80 keep the scalar code: the pass only drops the annotation
there, and the CPU pipelines never see it in their output.

The helpers ``tl::max2``/``tl::min2`` and the NaN-propagating ``tl::max2_nan``/``tl::min2_nan``
(overloads for ``half2`` and ``__nv_bfloat162``) are defined in the kernel's prelude only when used.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import scope_of, static_int
from ..language.tileops.reduce import PACKED_REDUCE
from .atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END
from .loop_marks import map_marked, mark_of, without_mark
from .source_imports import with_import_in_first_kernel
from .target import arch_of

_C_TYPE = {"float16": "half2", "bfloat16": "__nv_bfloat162"}
_ELEMENT = {"float16": "half", "bfloat16": "__nv_bfloat16"}
_INCLUDE = {"float16": "#include <cuda_fp16.h>\n", "bfloat16": "#include <cuda_bf16.h>\n"}
#: (helper, dtype) -> the CUDA intrinsic it wraps
_INTRINSIC = {"max2": "__hmax2", "min2": "__hmin2", "max2_nan": "__hmax2_nan", "min2_nan": "__hmin2_nan"}


def cuda_helper(name: str, dtype: str) -> str:
    """CUDA text of the packed helper ``tl::<name>`` for ``dtype`` (float16 or bfloat16).

    ``tl::max2(half* acc, const half* x)`` (and ``min2``, ``max2_nan``, ``min2_nan``) updates the
    two lanes at ``acc`` with the two at ``x`` (both 4-byte aligned); ``max2_abs``/``max2_abs_nan``
    take ``|x|``. The plain names also get the value overloads ``tl::max2(half2, half2)``.
    """
    t, e = _C_TYPE[dtype], _ELEMENT[dtype]
    base = name.replace("_abs", "")
    op = _INTRINSIC[base]
    x = "__habs2(*(const {t}*)x)".format(t=t) if "_abs" in name else f"*(const {t}*)x"
    value = "" if "_abs" in name else (
        f"__device__ __forceinline__ {t} {name}(const {t} a, const {t} b) {{ return {op}(a, b); }}\n"
    )
    return (
        _INCLUDE[dtype]
        + "namespace tl {\n"
        + value
        + f"__device__ __forceinline__ void {name}({e}* acc, const {e}* x) "
        f"{{ *({t}*)acc = {op}(*({t}*)acc, {x}); }}\n}}\n"
    )


def packs_on(target: Any) -> bool:
    """Whether ``target`` gets packed reductions: CUDA from sm_80 (an unknown arch counts as one)."""
    if target is None or target.kind.name != "cuda":
        return False
    arch = re.match(r"sm_(\d+)", arch_of(target) or "")
    return arch is None or int(arch.group(1)) >= 80


def _annotation(loop: Any) -> Optional[str]:
    return mark_of(loop, PACKED_REDUCE)


def _without_annotation(loop: Any, body: Any = None) -> Any:
    return without_mark(loop, PACKED_REDUCE, body)


def _strip(body: Any) -> Any:
    return map_marked(body, PACKED_REDUCE)


class _Reduction:
    """One annotated reduction loop ``for r: d[di] = combine(d[di], f(s[si]))``."""

    def __init__(self, loop: Any):
        self.loop = loop
        self.kind, _, nan = _annotation(loop).partition(".")
        self.nan = bool(nan)
        store = loop.body
        self.ok = False
        if not isinstance(store, tirx.BufferStore) or len(store.indices) != 1:
            return
        self.store = store
        self.d, self.di = store.buffer, store.indices[0]
        loads: list = []
        tvm_ffi.structural_walk(store.value, ((tvm.ir.TensorLoad,), loads.append), order="pre")
        sources = [ld for ld in loads if not ld.source.same_as(self.d)]
        if not sources or len(sources[0].indices) != 1:
            return
        self.s, self.si = sources[0].source, sources[0].indices[0]
        same = all(tvm_ffi.structural_equal(ld.indices[0], self.si) for ld in sources)
        dtype = str(self.d.ty.dtype)
        self.ok = (
            same
            and not self.s.same_as(self.d)
            and dtype in _C_TYPE
            and str(self.s.ty.dtype) == dtype
            and scope_of(self.d) == "local"
            and scope_of(self.s) == "local"
            and self.kind in ("max", "min", "absmax")
        )
        self.dtype = dtype

    def helper(self) -> str:
        return ("min2" if self.kind == "min" else "max2") + ("_abs" if self.kind == "absmax" else "") + ("_nan" if self.nan else "")

    def update2(self, acc: Any, x: Any) -> Any:
        """The statement ``tl::<helper>(&acc, &x)``: two lanes of the accumulator at ``acc`` take the
        two elements at ``x`` (loads of the first lane). A statement with pointers, because TVM's CUDA
        code generator prints a call returning ``half2`` one lane at a time."""
        return tirx.Evaluate(tirx.call_extern("int32", f"tl::{self.helper()}", tirx.address_of(acc), tirx.address_of(x)))

    def scalar_with(self, x: Any) -> Any:
        """The scalar update ``d[di] = combine(d[di], x)`` with ``x`` (already absolute) for the element."""

        def on_load(ld):
            return x if ld.source.same_as(self.s) else ld

        value = tvm_ffi.structural_map(self.store.value, [(tvm.ir.TensorLoad, on_load)])
        return tirx.BufferStore(self.d, value, [self.di])

    def identity(self) -> Any:
        if self.kind == "absmax":
            return tirx.FloatImm(self.dtype, 0.0)
        return tirx.FloatImm(self.dtype, float("-inf") if self.kind == "max" else float("inf"))


def _linear_in(analyzer: Any, index: Any, var: Any) -> bool:
    """Whether ``index`` is ``base + var`` with ``base`` free of ``var`` and even."""
    base = _sub(index, var, tirx.IntImm(var.ty.dtype, 0))
    if not tvm_ffi.structural_equal(analyzer.simplify(index - base), var):
        return False
    return analyzer.can_prove(tirx.floormod(base, 2) == 0)


def _sub(node: Any, var: Any, value: Any) -> Any:
    """``node`` with ``var`` replaced by ``value``."""
    return tvm_ffi.structural_map(node, [(tvm.ir.Var, lambda x: value if x.same_as(var) else x)])


def _ramp(base: Any) -> Any:
    return tirx.Ramp(base, tirx.IntImm(str(base.ty.dtype), 1), 2)


def _pair_kept(outer: Any, analyzer: Any, used: set) -> Optional[Any]:
    """Case "reduced dim not last": ``outer`` is the innermost kept-index loop around one
    annotated reduction loop (after an optional identity store); None when it does not fit."""
    body = outer.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    if not 1 <= len(stmts) <= 2 or _annotation(stmts[-1]) is None:
        return None
    red = _Reduction(stmts[-1])
    extent, v = static_int(outer.extent), outer.loop_var
    if not red.ok or extent is None or extent < 2 or static_int(outer.min) != 0 or outer.kind != tirx.ForKind.SERIAL:
        return None
    init = stmts[0] if len(stmts) == 2 else None
    if init is not None:
        reads: list = []
        tvm_ffi.structural_walk(init.value if isinstance(init, tirx.BufferStore) else init,
                                ((tvm.ir.TensorLoad,), reads.append), order="pre")
        if not (isinstance(init, tirx.BufferStore) and init.buffer.same_as(red.d) and not reads
                and tvm_ffi.structural_equal(init.indices[0], red.di)):
            return None
    if not (_linear_in(analyzer, red.di, v) and _linear_in(analyzer, red.si, v)):
        return None
    vp = tirx.Var(f"{v.name}_pair", v.ty.dtype)
    two_v = vp * tirx.IntImm(v.ty.dtype, 2)
    dfirst = _sub(red.di, v, two_v)
    dvec = _ramp(dfirst)
    update = red.update2(tirx.BufferLoad(red.d, [dfirst]), tirx.BufferLoad(red.s, [_sub(red.si, v, two_v)]))
    r = red.loop.loop_var
    r2 = tirx.Var(r.name, r.ty.dtype)  # the scalar tail below keeps r: one loop per variable
    loop = tirx.For(r2, red.loop.min, red.loop.extent, tirx.ForKind.SERIAL, _sub(update, r, r2))
    pair_body = [loop]
    if init is not None:
        pair_body.insert(0, tirx.BufferStore(red.d, tirx.Broadcast(init.value, 2), [dvec]))
    # without the identity store (clear=False) the loop is the whole body: TVM refuses a SeqStmt of one statement
    out = [tirx.For(vp, tirx.IntImm(v.ty.dtype, 0), tirx.IntImm(outer.extent.ty.dtype, extent // 2), tirx.ForKind.SERIAL,
                    tirx.SeqStmt(pair_body) if len(pair_body) > 1 else pair_body[0])]
    if extent % 2:
        out.append(_strip(_sub(body, v, tirx.IntImm(v.ty.dtype, extent - 1))))
    used.add((red.helper(), red.dtype))
    return tirx.SeqStmt(out) if len(out) > 1 else out[0]


def _pair_reduced(loop: Any, analyzer: Any, used: set) -> Optional[Any]:
    """Case "reduced dim last": the annotated loop ``loop`` reads adjacent elements in turn."""
    red = _Reduction(loop)
    extent, r = static_int(loop.extent), loop.loop_var
    if not red.ok or extent is None or extent < 2 or static_int(loop.min) != 0:
        return None
    if not _linear_in(analyzer, red.si, r):
        return None
    acc = tirx.decl_buffer([2], red.dtype, name=f"{red.d.name}_pair", scope="local")
    lanes = _ramp(tirx.IntImm("int32", 0))
    rp = tirx.Var(f"{r.name}_pair", r.ty.dtype)
    sfirst = _sub(red.si, r, rp * tirx.IntImm(r.ty.dtype, 2))
    update = red.update2(tirx.BufferLoad(acc, [tirx.IntImm("int32", 0)]), tirx.BufferLoad(red.s, [sfirst]))
    stmts = [
        tirx.AllocBuffer(acc),
        tirx.BufferStore(acc, tirx.Broadcast(red.identity(), 2), [lanes]),
        tirx.For(rp, tirx.IntImm(r.ty.dtype, 0), tirx.IntImm(loop.extent.ty.dtype, extent // 2), tirx.ForKind.SERIAL, update),
        # the lanes are already absolute for absmax: |x| of them changes nothing
        red.scalar_with(tirx.BufferLoad(acc, [tirx.IntImm("int32", 0)])),
        red.scalar_with(tirx.BufferLoad(acc, [tirx.IntImm("int32", 1)])),
    ]
    if extent % 2:
        stmts.append(_sub(red.store, r, tirx.IntImm(r.ty.dtype, extent - 1)))
    used.add((red.helper(), red.dtype))
    return tirx.SeqStmt(stmts)


def pack_reductions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with its annotated reductions packed (CUDA from sm_80) and the annotations dropped."""
    if func.body is None:
        return func
    found: list = []
    tvm_ffi.structural_walk(func.body, ((tirx.For,), lambda f: found.append(f) if _annotation(f) else None), order="pre")
    if not found:
        return func
    target = func.attrs.get("target") if func.attrs is not None else None
    if not packs_on(target):
        return func.with_body(_strip(func.body))
    analyzer = tvm.arith.Analyzer()
    used: set = set()

    def on_outer(loop):
        if _annotation(loop) is not None:
            return loop
        packed = _pair_kept(loop, analyzer, used)
        return loop if packed is None else packed

    body = tvm_ffi.structural_map(func.body, [(tirx.For, on_outer)])

    def on_reduction(loop):
        if _annotation(loop) is None:
            return loop
        packed = _pair_reduced(loop, analyzer, used)
        return _without_annotation(loop) if packed is None else packed

    body = tvm_ffi.structural_map(body, [(tirx.For, on_reduction)])
    if used:
        text = f"\n{CUDA_HELPERS_BEGIN}\n" + "".join(
            f"#ifndef TL_PACKED_{name.upper()}_{dtype.upper()}\n#define TL_PACKED_{name.upper()}_{dtype.upper()}\n"
            f"{cuda_helper(name, dtype)}#endif\n"
            for name, dtype in sorted(used)
        ) + f"{CUDA_HELPERS_END}\n"
        body = with_import_in_first_kernel(body, text)[0]
    return func.with_body(body)


def PackHalfReductions() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The GPU pass of :func:`pack_reductions` (after ``FlattenBuffer``, before loops are unrolled)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        return pack_reductions(func)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.PackHalfReductions")
