"""Warp/thread-index helpers and explicit barriers (:mod:`tilelang_core.language.tileops.warp`).

Their ``tl.math`` marker calls are handled in three places:

* **frontend** (:func:`resolve_thread_indices`, GPU ``T.Kernel`` only): ``T.get_lane_idx`` &
  co. and ``T.shuffle_elect`` become arithmetic on the block-linear thread id ``tid`` (lane =
  ``tid % warp_size``, warp = ``tid // warp_size``, group = ``tid // (warp_size *
  warps_per_group)``, elect = ``tid % thread_extent == 0``, or ``tid == 0`` for 0).
  :func:`refuse_under_guard` refuses a barrier or warp reduction in a ``T.Parallel`` loop whose
  iterations do not cover every thread (the guard the frontend adds would keep some threads from
  reaching it: a hang or undefined behaviour); :func:`refuse_partial_warps` a warp reduction or
  full-mask ``T.sync_warp`` in a block whose thread count is not a multiple of 32.
* **CUDA** (:func:`lower_gpu_statement`, :func:`lower_gpu_call` from
  :func:`tilelang_core.lowering.intrinsics.lower_gpu_intrinsics`): ``T.sync_threads()`` becomes
  TVM's own ``tvm_storage_sync("shared")`` (printed ``__syncthreads()``), so TVM's ThreadSync
  pass, which runs later, counts it and inserts no second barrier where it already orders the
  accesses; a named barrier is ``tvm_storage_sync("shared", id[, count])`` for ThreadSync too,
  and :func:`NamedBarriers` (right after ThreadSync) turns it into the ``bar.sync`` helper.
  ``T.sync_warp`` is ``__syncwarp(mask)``; the warp reductions call helpers (butterfly of
  ``__shfl_xor_sync`` over the full warp) defined in the kernel's prelude.
* **CPU** (from ``lower_cpu_intrinsics``): the barriers are dropped (a CPU block runs as one
  thread); the other helpers are GPU intrinsics refused there like ``T.shfl_xor``.

``T.sync_grid`` is refused on every target, by the frontend's first step (:func:`refuse_grid_syncs`).
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.tileops.warp import INDEX_MARKERS, REDUCE_MARKERS

#: Markers that are GPU intrinsics (a LoweringError on CPU targets).
GPU_ONLY = INDEX_MARKERS + REDUCE_MARKERS
#: Barrier markers (statements; nothing to do on CPU targets).
BARRIERS = ("sync_threads", "sync_warp")
#: Markers every thread of a warp or block must reach together.
COLLECTIVE = BARRIERS + REDUCE_MARKERS
#: Block votes (``T.syncthreads_and/or/count``): barriers every thread of the block must reach.
BLOCK_VOTES = ("syncthreads_and", "syncthreads_or", "syncthreads_count")
#: Warp votes and shuffles whose first argument is a lane mask: with the full mask they need
#: every lane of the warp (``T.shfl_xor``, ``T.any_sync``, ...).
MASKED_WARP_OPS = ("any_sync", "all_sync", "ballot_sync", "shfl_sync", "shfl_xor", "shfl_down", "shfl_up",
                   "match_any_sync", "match_all_sync")
_FULL_MASK = 0xFFFFFFFF
#: Marker name -> the ``T.`` name users wrote.
PUBLIC_NAME = {"lane_idx": "get_lane_idx", "warp_idx": "get_warp_idx", "warp_idx_sync": "get_warp_idx_sync",
               "warp_group_idx": "get_warp_group_idx"}

_NAMED_BARRIER = "tl_named_barrier_sync"


def _parse(call: Any):
    from .intrinsics import parse

    return parse(call)


# -- frontend ------------------------------------------------------------------------------


def resolve_thread_indices(stmt: Any, tid: Any) -> Any:
    """``stmt`` with the thread-index markers replaced by arithmetic on ``tid`` (int32)."""

    def on_call(call):
        m = _parse(call)
        if m is None or m.name not in INDEX_MARKERS:
            return call
        a = m.args
        if m.name == "lane_idx":
            return tirx.floormod(tid, a[0])
        if m.name in ("warp_idx", "warp_idx_sync"):
            return tirx.floordiv(tid, a[0])
        if m.name == "warp_group_idx":
            return tirx.floordiv(tid, a[0] * a[1])
        extent = int(a[0].value)  # shuffle_elect
        zero = tirx.IntImm("int32", 0)
        return tid == zero if extent == 0 else tirx.floormod(tid, a[0]) == zero

    return tvm_ffi.structural_map(stmt, [(tvm.ir.Call, on_call)])


def _full_mask(m: Any) -> bool:
    """Whether ``m`` (a warp vote or shuffle marker) names all 32 lanes with a constant mask."""
    mask = m.args[0] if m.args else None
    return isinstance(mask, tirx.IntImm) and int(mask.value) & _FULL_MASK == _FULL_MASK


def needs_whole_warp(m: Any) -> bool:
    """Whether marker ``m`` needs every lane of its warp: a warp reduction, a full-mask
    ``T.sync_warp``, or a warp vote or shuffle with the full mask (the default)."""
    return m.name in REDUCE_MARKERS or (m.name in MASKED_WARP_OPS + ("sync_warp",) and _full_mask(m))


def first_collective(stmt: Any) -> Optional[Any]:
    """The first marker in ``stmt`` (a ``MathOp``) that every thread of the block or every lane
    of a warp must reach: a barrier, a block vote, a warp reduction, or a full-mask warp vote or
    shuffle; else None."""
    found = []

    def on_call(call):
        m = _parse(call)
        if found or m is None:
            return call
        if m.name in COLLECTIVE or m.name in BLOCK_VOTES or (m.name in MASKED_WARP_OPS and _full_mask(m)):
            found.append(m)
        return call

    tvm_ffi.structural_map(stmt, [(tvm.ir.Call, on_call)])
    return found[0] if found else None


def refuse_under_guard(body: Any, total: Any, threads: int) -> None:
    """Raise when ``body`` (a ``T.Parallel`` body the GPU frontend guards with ``flat < total``)
    holds a barrier or warp reduction: the threads without an iteration would not reach it."""
    m = first_collective(body)
    if m is None:
        return
    block = m.name == "sync_threads" or m.name in BLOCK_VOTES
    what = "every thread of the block" if block else "every lane of the warp"
    hint = "" if block or m.name in COLLECTIVE else ", or pass a mask of the lanes that take part"
    raise LoweringError(
        f"{m.loc}: T.{m.name} inside a T.Parallel loop of {total} iterations over {threads} threads: the "
        f"iterations do not cover every thread, so some would skip it, and it needs {what} (a hang or "
        "undefined results). Call it outside the T.Parallel loop, or give the loop a multiple of the "
        f"block's thread count of iterations{hint}"
    )


def refuse_partial_warps(body: Any, threads: int, kernel_loc: str) -> None:
    """Raise when a block of ``threads`` threads (not a multiple of 32: its last warp is partial)
    holds a warp reduction or a full-mask ``T.sync_warp``: they name all 32 lanes, and naming a
    lane that does not exist is undefined behaviour in CUDA."""
    if threads % 32 == 0:
        return
    found = []

    def on_call(call):
        m = _parse(call)
        if m is not None and not found and needs_whole_warp(m):
            found.append(m)
        return call

    tvm_ffi.structural_map(body, [(tvm.ir.Call, on_call)])
    if found:
        m = found[0]
        raise LoweringError(
            f"{m.loc}: T.{m.name} works on whole warps (all 32 lanes), but the T.Kernel at {kernel_loc} has "
            f"{threads} threads per block, so its last warp has only {threads % 32}; give the kernel a "
            "multiple of 32 threads" + ("" if m.name in REDUCE_MARKERS else f", or a T.{m.name} mask of the lanes that exist")
        )


# -- refusals ------------------------------------------------------------------------------


def refuse_grid_sync(m: Any) -> None:
    """The ``LoweringError`` of ``T.sync_grid`` (every target)."""
    raise LoweringError(
        f"{m.loc}: T.sync_grid() is a grid-wide barrier, which needs a cooperative kernel launch "
        "(cudaLaunchCooperativeKernel, every block resident at once); no backend here launches "
        "kernels that way, so no target lowers it. Split the kernel in two at the barrier: the "
        "second kernel's launch starts after every block of the first has finished"
    )


def refuse_grid_syncs(stmt: Any) -> None:
    """Raise :func:`refuse_grid_sync` for the first ``T.sync_grid`` in ``stmt`` (the frontend's
    first step, so that the error is the same on every target)."""
    found = []

    def on_call(call):
        m = _parse(call)
        if m is not None and m.name == "sync_grid" and not found:
            found.append(m)
        return call

    tvm_ffi.structural_map(stmt, [(tvm.ir.Call, on_call)])  # raised outside: the map would wrap the error
    if found:
        refuse_grid_sync(found[0])


def refuse_as_value(m: Any) -> None:
    """A barrier used as a value (``x = T.sync_threads()``)."""
    raise LoweringError(f"{m.loc}: T.{m.name}() is a statement of its own (it returns nothing)")


# -- CUDA ----------------------------------------------------------------------------------

#: CUDA type of each dtype, and the type the warp shuffles carry it in.
_CU_TYPE = {
    "int8": ("signed char", "int"), "int16": ("short", "int"), "int32": ("int", "int"),
    "int64": ("long long", "long long"), "uint8": ("unsigned char", "unsigned int"),
    "uint16": ("unsigned short", "unsigned int"), "uint32": ("unsigned int", "unsigned int"),
    "uint64": ("unsigned long long", "unsigned long long"), "float16": ("__half", "float"),
    "bfloat16": ("__nv_bfloat16", "float"), "float32": ("float", "float"), "float64": ("double", "double"),
}
_TO_WIDE = {"float16": "__half2float(v)", "bfloat16": "__bfloat162float(v)"}
_FROM_WIDE = {"float16": "__float2half_rn(x)", "bfloat16": "__float2bfloat16_rn(x)"}
_INCLUDE = {"float16": "#include <cuda_fp16.h>\n", "bfloat16": "#include <cuda_bf16.h>\n"}


def _combine(op: str, wide: str) -> str:
    if op == "sum" and wide in ("int", "long long"):  # wraps (a signed overflow would be undefined)
        return f"({wide})((unsigned {wide})x + (unsigned {wide})y)"
    if op == "sum":
        return "x + y"
    if op == "bitand":
        return "x & y"
    if op == "bitor":
        return "x | y"
    if wide in ("float", "double"):
        fn = {"max": "fmax", "min": "fmin"}[op] + ("f" if wide == "float" else "")
        return f"{fn}(x, y)"
    return "(y > x ? y : x)" if op == "max" else "(y < x ? y : x)"


def helper_name(op: str, dtype: str) -> str:
    """Name of the CUDA helper of one warp reduction."""
    return f"tl_warp_reduce_{op}_{dtype}"


def cuda_helper(name: str) -> Optional[str]:
    """CUDA text of helper ``name`` (a warp reduction or the named barrier), else None."""
    if name == _NAMED_BARRIER:
        return (
            f"__device__ __forceinline__ void {name}(int id, int count) "
            '{ asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(count) : "memory"); }\n'
            f"__device__ __forceinline__ void {name}_all(int id) "
            '{ asm volatile("bar.sync %0;" : : "r"(id) : "memory"); }\n'
        )
    if not name.startswith("tl_warp_reduce_"):
        return None
    op, dtype = name[len("tl_warp_reduce_"):].split("_", 1)
    ctype, wide = _CU_TYPE[dtype]
    to_wide = _TO_WIDE.get(dtype, f"({wide})v")
    from_wide = _FROM_WIDE.get(dtype, f"({ctype})x")
    return (
        _INCLUDE.get(dtype, "")
        + f"__device__ __forceinline__ {ctype} {name}({ctype} v) {{\n"
        f"  {wide} x = {to_wide};\n"
        "  for (int m = 16; m > 0; m >>= 1) {\n"
        f"    {wide} y = __shfl_xor_sync(0xffffffffu, x, m, 32);\n"
        f"    x = {_combine(op, wide)};\n"
        "  }\n"
        f"  return {from_wide};\n}}\n"
    )


def lower_gpu_statement(m: Any, used: set) -> Optional[Any]:
    """The CUDA statement of a barrier marker statement ``m``, else None."""
    if m.name == "sync_grid":
        refuse_grid_sync(m)
    if m.name == "sync_warp":
        return tirx.Evaluate(tirx.call_extern("int32", "__syncwarp", m.args[0]))
    if m.name == "sync_threads":
        if m.args:
            used.add(_NAMED_BARRIER)
        return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", tvm.ir.StringImm("shared"), *m.args))
    return None


def lower_gpu_call(m: Any, used: set) -> Optional[Any]:
    """The CUDA expression of a warp marker call ``m``, else None."""
    if m.name in BARRIERS or m.name == "sync_grid":
        refuse_as_value(m)
    if m.name in REDUCE_MARKERS:
        name = helper_name(m.name[len("warp_reduce_"):], m.dtype)
        used.add(name)
        return tirx.call_extern(m.dtype, name, m.args[0])
    if m.name in INDEX_MARKERS:
        raise LoweringError(f"{m.loc}: T.{PUBLIC_NAME.get(m.name, m.name)}() must be used inside a T.Kernel")
    return None


def _named_barrier(call: Any) -> Any:
    if getattr(call.op, "name", "") != "tirx.tvm_storage_sync" or len(call.args) < 2:
        return call
    scope = call.args[0]
    if not isinstance(scope, tvm.ir.StringImm) or scope.value != "shared":
        return call
    if len(call.args) == 2:
        return tirx.call_extern("int32", f"{_NAMED_BARRIER}_all", call.args[1])
    return tirx.call_extern("int32", _NAMED_BARRIER, call.args[1], call.args[2])


def NamedBarriers() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """After TVM's ThreadSync: the named barriers of ``T.sync_threads(id[, count])`` (kept as
    ``tvm_storage_sync("shared", id[, count])`` so that ThreadSync counts them) become calls of
    the ``bar.sync`` helper (TVM's CUDA code generator would print ``__syncthreads()``)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        refuse_match_before_sm70(func)
        return func.with_body(tvm_ffi.structural_map(func.body, [(tvm.ir.Call, _named_barrier)]))

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.NamedBarriers")


#: CUDA callee of ``T.match_any_sync``/``T.match_all_sync`` (lowering/intrinsics.py) -> the ``T.`` name.
_MATCH_CALLEES = {"__match_any_sync": "match_any_sync", "tl_match_all_sync": "match_all_sync"}
_MATCH_FIRST_ARCH = 70


def refuse_match_before_sm70(func: Any) -> None:
    """Raise :class:`TargetFeatureError` when a CUDA kernel for an architecture before sm_70 calls
    ``__match_any_sync``/``__match_all_sync`` (``T.match_any_sync``/``T.match_all_sync``): the
    instructions exist from sm_70 (Volta) on, and the source would not compile (an unknown
    architecture is let through: the CUDA compiler then decides)."""
    from ..errors import TargetFeatureError
    from .tma_atomics import arch_number

    attrs = func.attrs if func.attrs is not None else {}
    target = attrs.get("target")
    if target is None or target.kind.name != "cuda":
        return
    arch = arch_number(target)
    if arch is None or arch >= _MATCH_FIRST_ARCH:
        return
    found: list = []

    def on_call(call):
        if not found and getattr(call.op, "name", "") == "tirx.call_extern" and call.args:
            callee = call.args[0]
            if isinstance(callee, tvm.ir.StringImm) and callee.value in _MATCH_CALLEES:
                found.append(_MATCH_CALLEES[callee.value])
        return call

    tvm_ffi.structural_map(func.body, [(tvm.ir.Call, on_call)])  # raised outside: the map would wrap the error
    if found:
        location = str(attrs.get("tl.source_location", "")) or "<unknown>"
        raise TargetFeatureError(
            f"{location}: T.{found[0]} needs CUDA sm_70 or later (__{found[0]} exists from Volta on); the "
            f"target is sm_{arch}. Lower the kernel for sm_70 or later (target=\"cuda -arch=sm_70\"), or compare "
            "the lanes' values another way on this architecture (T.shfl_sync and T.ballot_sync)"
        )


# -- CPU -----------------------------------------------------------------------------------


def lower_cpu_statement(m: Any, language: str) -> Optional[Any]:
    """The CPU statement of a barrier marker statement ``m`` (nothing), else None."""
    if m.name == "sync_grid":
        refuse_grid_sync(m)
    if m.name in BARRIERS:
        return tirx.Evaluate(tirx.IntImm("int32", 0))
    return None


def lower_cpu_call(m: Any) -> None:
    """Refuse a barrier used as a value on CPU (the GPU-only helpers are refused by the caller)."""
    if m.name in BARRIERS or m.name == "sync_grid":
        refuse_as_value(m)
