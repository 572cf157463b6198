"""First lowering step: turn ``T.Kernel`` / ``T.Parallel`` markers into plain TIR for a target family.

Input: a PrimFunc parsed from :mod:`tilelang_core.language` (kernel grid loops annotated with
``tl.kernel_*``, ``T.Parallel`` nests preceded by a ``tl.parallel`` marker statement).
Output: ordinary TIR that TVM's passes understand:

* GPU: ``blockIdx``/``threadIdx`` launch attributes; each ``T.Parallel`` nest of ``E`` iterations
  becomes ``for it in range(ceildiv(E, threads)): flat = it * threads + tid; if flat < E: ...``
  (the loop and the guard disappear when they are not needed). A nest whose only effect is storing
  into per-thread ``local`` tiles runs whole in every thread instead, as a serial loop nest
  (:mod:`tilelang_core.lowering.parallel_locals`, which also refuses reads of a local tile that a
  spread nest left partial).
* CPU: one loop over all blocks that recomputes ``bx, by, bz``; ``T.Parallel`` nests stay serial
  loop nests. The block loop strategy (:meth:`Frontend._cpu_block_loop`): the loop is serial when
  parallel blocks are disabled or when the kernel is small: fewer than two blocks, or an estimated
  work (:func:`block_work`: loop body executions of all blocks together) known at lowering time to
  be under :data:`PARALLEL_MIN_WORK`. Kernels with atomics are no exception: atomics are real
  atomics on every CPU path (:mod:`tilelang_core.lowering.atomics`). Otherwise the loop is
  ``ForKind.PARALLEL``; the C device-source path (``emit_pragmas``) also annotates it with
  :data:`BLOCK_LOOP_KEY` (its work expression), and :mod:`tilelang_core.lowering.codegen` outlines
  it into a block-range function run through the kernel's block launcher (serially when the work
  at call time is under the threshold). With ``emit_pragmas`` a pragma marker is placed before
  innermost parallel loops whose body has no loop, call or atomic update (``omp simd``); codegen
  turns it into a ``#pragma`` line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from .atomics import contains_atomics
from ..language.tileops._common import collect, scope_of, substitute, uses_var
from .access_guards import guard_global_accesses
from .tile_bounds import refuse_tile_overruns
from .markers import extern_name, parallel_loops, parallel_ndim, safe_value_marker
from .lane_reductions import SIMD_LANES
from .parallel_locals import plan as plan_parallel_locals
from .parallel_order import loop_values, static_count
from .signature import to_int64
from .warp import refuse_grid_syncs, refuse_partial_warps, refuse_under_guard, resolve_thread_indices

#: Marker names of the reducer operators (tilelang_core.language.tileops.reducer).
REDUCER_FINALIZE_CALL = "tl.reducer.finalize"
REDUCER_UPDATE_KEY = "tl.reducer_update"
from ..language.core import (
    KERNEL_AXIS_KEY,
    KERNEL_IS_CPU_KEY,
    KERNEL_LOC_KEY,
    KERNEL_NDIM_KEY,
    KERNEL_THREADS_KEY,
)

#: Name of the extern call the C source path uses to mark where a ``#pragma`` goes.
PRAGMA_MARKER = "TL_PRAGMA"

#: Estimated work (loop body executions of all blocks together, see :func:`block_work`) below
#: which a CPU kernel's blocks run serially: starting threads costs more than such a kernel
#: gains from them (and, on a busy machine, far more). Documented in docs/pipeline.md.
PARALLEL_MIN_WORK = 1 << 16

#: Annotation of a parallel CPU block loop on the C source path: its work expression (int64).
BLOCK_LOOP_KEY = "tl.parallel_block_loop"

_TAGS_BLOCK = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_TAGS_THREAD = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass
class FrontendOptions:
    """What the target family needs from this step."""

    gpu: bool
    max_threads: int = 1024
    max_thread_dims: tuple = (1024, 1024, 64)
    parallel_blocks: bool = True
    emit_pragmas: bool = False
    simd: bool = True
    func_location: str = "<unknown>"
    guard_accesses: bool = True  # lowering/access_guards.py (off: tl.disable_safe_memory_legalize)


@dataclass
class _Ctx:
    kernel: Optional[dict] = None  # {"loc", "tid", "threads", "blocks" (grid loop vars), "block_loops" (their
    #                                 For nodes), "thread_vars", "body" (GPU)}
    in_parallel: bool = False
    safe_values: tuple = ()  # ((buffer, value), ...) of T.annotate_safe_value in scope, innermost last


#: Largest int32: block counts up to it fit the int32 index of one grid axis.
INT32_MAX = 2**31 - 1


def _int32_safe(extent: Any) -> Any:
    """An int32 grid extent computed without int32 overflow on the way: ``(n + 63) // 64`` (what
    ``T.ceildiv(n, 64)`` was; it is ``(n - 1) // 64 + 1`` now) overflows for ``n`` near 2**31
    although the block count fits, and then no block ran. The expression is evaluated in int64 and
    the count narrowed back."""
    if _int(extent) is not None or str(extent.ty.dtype) != "int32" or isinstance(extent, (tirx.Var, tirx.IntImm)):
        return extent
    return tirx.Cast("int32", to_int64(extent))


def _int(expr: Any) -> Optional[int]:
    if isinstance(expr, int):
        return expr
    value = getattr(expr, "value", None)
    if isinstance(value, int) and type(expr).__name__ == "IntImm":
        return value
    return None


def _as_expr(value: Any, dtype: str = "int32"):
    if isinstance(value, int):
        return tirx.IntImm(dtype, value)
    return value


def _guard_safe_loads(body: Any, safe_values: tuple) -> Any:
    """Loads of annotated buffers in a ``T.Parallel`` body read the annotated value outside the buffer
    (global buffers: every load is guarded by lowering/access_guards.py, with the annotated value)."""
    from ..language.tileops._common import all_of, cast, static_int

    def on_load(load: Any) -> Any:
        for buffer, value in reversed(safe_values):
            if scope_of(buffer) == "global":
                continue
            if not load.source.same_as(buffer):
                continue
            conds = []
            for index, dim in zip(load.indices, buffer.shape):
                i, d = static_int(index), static_int(dim)
                if i is not None and d is not None and 0 <= i < d:
                    continue
                conds.append(tirx.And(index >= 0, index < dim))
            if not conds:
                return load
            return tirx.if_then_else(all_of(conds), load, cast(value, str(buffer.dtype)))
        return load

    return tvm_ffi.structural_map(body, [(tvm.ir.TensorLoad, on_load)])


def _reducer_finalize(stmt: Any) -> Optional[tuple]:
    """``(op, loc, reducer buffer)`` of a ``T.finalize_reducer`` marker statement, else None."""
    call = stmt.value
    if not isinstance(call, tvm.ir.Call) or len(call.args) != 4:
        return None
    name = call.args[0]
    if not (isinstance(name, tvm.ir.StringImm) and name.value == REDUCER_FINALIZE_CALL):
        return None
    return call.args[1].value, call.args[2].value, call.args[3].args[0].source


def _pragma(text: str, var_name: str):
    """``TL_PRAGMA__omp_simd__i()``: pragma text and loop variable encoded in the callee's name."""
    callee = f"{PRAGMA_MARKER}__{text.replace(' ', '_')}__{var_name}"
    return tirx.Evaluate(tirx.call_extern("int32", callee))


def _seq(stmts: list):
    stmts = [s for s in stmts if s is not None]
    if len(stmts) == 1:
        return stmts[0]
    return tirx.SeqStmt(stmts)


def _bind_indices(stmt: Any, variables: list, which: str) -> Any:
    """Replace ``T.get_thread_binding(d)``/``T.get_block_binding(d)`` markers (``which``) by the
    GPU index variable of axis ``d`` (0 for an axis the kernel does not launch)."""
    from .intrinsics import parse as parse_intrinsic

    def on_call(call):
        m = parse_intrinsic(call)
        if m is None or m.name != which:
            return call
        var = variables[int(m.args[0].value)]
        return var if var is not None else tirx.IntImm("int32", 0)

    return tvm_ffi.structural_map(stmt, [(tvm.ir.Call, on_call)])


def without_simd_pragmas(body: Any, scalar: Callable[[Any], bool]) -> Any:
    """``body`` without the ``omp simd`` pragma marker (:func:`_pragma`) of each loop for which
    ``scalar(loop)`` holds: a loop a later pass gave a ``return`` (a check, a failed allocation),
    which may not leave an ``omp simd`` loop. The marker is the statement right before its loop."""
    simd = f"{PRAGMA_MARKER}__omp_simd__"

    def on_seq(seq: Any) -> Any:
        items = list(seq.seq)
        kept = [s for i, s in enumerate(items)
                if not (isinstance(s, tirx.Evaluate) and (extern_name(s.value) or "").startswith(simd)
                        and i + 1 < len(items) and isinstance(items[i + 1], tirx.For) and scalar(items[i + 1]))]
        return seq if len(kept) == len(items) else _seq(kept)

    return tvm_ffi.structural_map(body, [(tirx.SeqStmt, on_seq)])


def contains(stmt: Any, kinds: tuple) -> bool:
    """Whether ``stmt`` holds a node of one of the classes ``kinds``."""
    return bool(collect(stmt, kinds))


def _moves_across_rows(indices: Any, var: Any) -> bool:
    """Whether an access at ``indices`` moves by other than one element as ``var`` steps: ``var``
    in an index before the last, or in the last one with a coefficient other than 0 or +-1 (or not
    linearly)."""
    indices = list(indices)
    if not indices:
        return False
    if any(uses_var(index, var) for index in indices[:-1]):
        return True
    last = indices[-1]
    if not uses_var(last, var):
        return False
    coefficients = tvm.sym.detect_linear_equation(last, [var])
    if len(coefficients) != 2 or not isinstance(coefficients[0], tirx.IntImm):
        return True
    return abs(int(coefficients[0].value)) > 1


def strided_self_update(body: Any, var: Any) -> bool:
    """Whether ``body`` (the body of a loop over ``var``) reads a buffer that it also writes, with
    an access of that buffer moving across rows as ``var`` steps (:func:`_moves_across_rows`): a
    column of a tile, ``s[i, j] = s[i, j - 1] + s[i, j]`` in a loop over ``i`` inside one over ``j``,
    as ``T.cumsum(dim=1)`` builds. GCC 12 compiling such a loop under ``#pragma omp simd`` with
    ``-O3`` unrolls and versions the outer loop, and both the build and the run time grow with the
    square of its extent: a 4 x 4096 scan kernel built in 15.7 s and took 9.0 ms a call, against
    0.16 s and 0.02 ms without the pragma (the C loop alone, 8 x 4096: 28 s to compile with it,
    0.03 s without). Such loops get no pragma (GCC still vectorizes them if it can)."""
    stores = collect(body, tirx.BufferStore)
    loads = collect(body, tvm.ir.TensorLoad)
    updated = [s.buffer for s in stores if any(load.source.same_as(s.buffer) for load in loads)]
    if not updated:
        return False
    accesses = [(s.buffer, s.indices) for s in stores] + [(load.source, load.indices) for load in loads]
    return any(_moves_across_rows(indices, var) for buffer, indices in accesses
               if any(buffer.same_as(u) for u in updated))


class Frontend:
    """Rewrites one PrimFunc body; see the module docstring."""

    def __init__(self, options: FrontendOptions):
        self.opt = options

    # -- entry -------------------------------------------------------------------------------
    def run(self, func: tirx.PrimFunc) -> tirx.PrimFunc:
        """Return ``func`` with its body rewritten."""
        from .atomic_values import bind_atomic_values
        from .float_negations import keep_float_negations
        from .logical import lower_logical_reductions
        from .loop_control import lower_loop_breaks
        from .loop_steps import normalize_loop_steps
        from .persistent import expand_persistent_loops
        from .tir_rewrites import legalize_negative_indices

        refuse_grid_syncs(func.body)  # T.sync_grid: no cooperative launch on any target (lowering/warp.py)
        func = bind_atomic_values(func)  # an atomic's previous value used as an operand: evaluated once
        func = keep_float_negations(func)  # not (a < b) of floats: true for NaN, before any simplification
        func = normalize_loop_steps(func, self.opt.func_location)  # range(start, stop, step) as Python runs it
        func = legalize_negative_indices(func)  # A[-1]: the last element, before accesses are guarded
        refuse_tile_overruns(func, self.opt.func_location)  # s[i] for i in 0..63 of a 1-element tile: an error, not a guard
        func = lower_loop_breaks(func, self.opt.func_location, self.opt.gpu)  # before any loop is rewritten
        func = lower_logical_reductions(func, self.opt.gpu)  # T.any_of/T.all_of: trees, or loops before their statements
        func = expand_persistent_loops(func, self.opt.func_location)
        body = self.visit(func.body, _Ctx())
        return func.with_body(body)

    def _refuse_gpu_threads(self, what: str, tag: str, ctx: _Ctx, stmt: Any) -> None:
        """A loop or launch bound to a GPU thread/block index in a kernel lowered for a CPU target.

        TVM's C and LLVM code generators stop at them with a bare 'not implemented'.
        """
        from ..language.spans import span_to_location

        where = span_to_location(getattr(stmt, "span", None))
        loc = f"{where[0]}:{where[1]}" if where else (ctx.kernel["loc"] if ctx.kernel is not None else self.opt.func_location)
        raise LoweringError(
            f"{loc}: {what} is bound to the GPU index '{tag}', which CPU targets (c, llvm) do not have; "
            "write the loop with T.Parallel or T.serial (T.Kernel's threads= sizes the block), or lower the kernel for cuda"
        )

    # -- generic traversal -------------------------------------------------------------------
    def visit(self, stmt: Any, ctx: _Ctx) -> Any:
        """Rewrite one statement (recursing into the bodies of compound statements)."""
        if isinstance(stmt, tirx.SeqStmt):
            return self.visit_seq(list(stmt.seq), ctx)
        if isinstance(stmt, tirx.For):
            if KERNEL_AXIS_KEY in stmt.annotations:
                return self.visit_kernel(stmt, ctx)
            if not self.opt.gpu and stmt.thread_binding is not None:
                self._refuse_gpu_threads(f"T.thread_binding loop '{stmt.loop_var}'",
                                         str(stmt.thread_binding.thread_tag), ctx, stmt)
            lanes = SIMD_LANES in stmt.annotations  # a split reduction's lane loop (lowering/lane_reductions.py)
            loop = tirx.For(
                stmt.loop_var,
                stmt.min,
                stmt.extent,
                stmt.kind,
                self.visit(stmt.body, ctx),
                stmt.thread_binding,
                {k: v for k, v in stmt.annotations.items() if k != SIMD_LANES} if lanes else stmt.annotations,
                stmt.step,
                stmt.span,
            )
            if lanes and self.opt.emit_pragmas and self.opt.simd:
                return _seq([_pragma("omp simd", str(stmt.loop_var)), loop])
            return loop
        if isinstance(stmt, tirx.IfThenElse):
            else_case = self.visit(stmt.else_case, ctx) if stmt.else_case is not None else None
            return tirx.IfThenElse(stmt.condition, self.visit(stmt.then_case, ctx), else_case, stmt.span)
        if isinstance(stmt, tirx.AttrStmt):
            if stmt.attr_key == REDUCER_UPDATE_KEY:
                if not ctx.in_parallel:
                    raise LoweringError(
                        f"{stmt.node.value}: T.reducer_update outside any T.Parallel: write it inside the "
                        "T.Parallel loop whose iterations contribute"
                    )
                return self.visit(stmt.body, ctx)
            if not self.opt.gpu and stmt.attr_key == "thread_extent":
                self._refuse_gpu_threads(f"T.launch_thread '{stmt.node.var}'", str(stmt.node.thread_tag), ctx, stmt)
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, self.visit(stmt.body, ctx), stmt.span)
        if isinstance(stmt, tirx.While):
            return tirx.While(stmt.condition, self.visit(stmt.body, ctx), stmt.span)
        if isinstance(stmt, tirx.Evaluate) and _reducer_finalize(stmt) is not None:
            return self.finalize_reducer(stmt, ctx)
        if isinstance(stmt, tirx.Evaluate):
            from .debug_print import expand_print, print_marker

            if print_marker(stmt) is not None:  # T.print: lines naming the block and thread
                return expand_print(self, stmt, ctx)
        if safe_value_marker(stmt) is not None:
            return tirx.Evaluate(tirx.IntImm("int32", 0))  # alone in its scope: nothing follows it
        if parallel_ndim(stmt) is not None:
            raise LoweringError(
                f"{self.opt.func_location}: T.Parallel must be used as the iterator "
                "of a for statement ('for i in T.Parallel(n):')"
            )
        return stmt

    def visit_seq(self, stmts: list, ctx: _Ctx) -> Any:
        """Rewrite a statement sequence, pairing each ``T.Parallel`` marker with its loop nest."""
        out = []
        i = 0
        while i < len(stmts):
            annotated = safe_value_marker(stmts[i])
            if annotated is not None:  # T.annotate_safe_value: holds for the rest of this scope
                ctx = _Ctx(kernel=ctx.kernel, in_parallel=ctx.in_parallel, safe_values=(*ctx.safe_values, annotated))
                i += 1
                continue
            ndim = parallel_ndim(stmts[i])
            if ndim is not None:
                if i + 1 >= len(stmts) or not isinstance(stmts[i + 1], tirx.For):
                    raise LoweringError(
                        f"{self.opt.func_location}: T.Parallel must be used as the iterator of a for statement"
                    )
                out.append(self.visit_parallel(stmts[i + 1], ndim, ctx))
                i += 2
                continue
            out.append(self.visit(stmts[i], ctx))
            i += 1
        return _seq(out)

    # -- T.Kernel ----------------------------------------------------------------------------
    def visit_kernel(self, loop: Any, ctx: _Ctx) -> Any:
        """Rewrite the grid loops of one ``T.Kernel`` (see the module docstring)."""
        ann = loop.annotations
        loc = str(ann.get(KERNEL_LOC_KEY, "")) or self.opt.func_location
        if ctx.kernel is not None:
            raise LoweringError(
                f"{loc}: T.Kernel is nested inside the T.Kernel at {ctx.kernel['loc']}; a kernel body "
                "cannot launch another kernel. Use a single T.Kernel with more grid axes, or loops."
            )
        ndim = _int(ann[KERNEL_NDIM_KEY])
        threads = [int(_int(t)) for t in ann[KERNEL_THREADS_KEY]]
        loops = [loop]
        for _ in range(ndim - 1):
            inner = loops[-1].body
            if not (isinstance(inner, tirx.For) and KERNEL_AXIS_KEY in inner.annotations):
                raise LoweringError(f"{loc}: malformed T.Kernel grid (expected {ndim} nested grid loops)")
            loops.append(inner)
        body = loops[-1].body
        if self.opt.guard_accesses:  # accesses outside a tensor are skipped (lowering/access_guards.py)
            body = guard_global_accesses(body, loops, threads, version_loops=not self.opt.gpu, on_chip=not self.opt.gpu)
        if self.opt.gpu:
            if _int(ann.get(KERNEL_IS_CPU_KEY, 0)):
                raise LoweringError(
                    f"{loc}: T.Kernel(..., is_cpu=True) declares a CPU kernel (its body runs once per "
                    "block), but the target is a GPU target; lower it for 'c' or 'llvm', or drop "
                    "is_cpu=True and write the body for the block's threads"
                )
            return self._kernel_gpu(loops, threads, body, loc, ctx)
        return self._kernel_cpu(loops, threads, body, loc, ctx)

    def _kernel_gpu(self, loops: list, threads: list, body: Any, loc: str, ctx: _Ctx) -> Any:
        total = threads[0] * threads[1] * threads[2]
        if total > self.opt.max_threads:
            raise LoweringError(
                f"{loc}: T.Kernel threads={tuple(threads)} gives {total} threads per block, over the "
                f"target's limit of {self.opt.max_threads}; use fewer threads per block."
            )
        for axis, (t, limit) in enumerate(zip(threads, self.opt.max_thread_dims)):
            if t > limit:
                raise LoweringError(
                    f"{loc}: T.Kernel threads[{axis}] = {t} is over the target's limit of {limit} for that axis"
                )
        thread_ivs = []
        for axis, extent in enumerate(threads):
            if axis > 0 and extent == 1:
                continue
            var = tirx.Var(_TAGS_THREAD[axis], "int32")
            iv = tirx.IterVar(tvm.ir.Range(0, _as_expr(extent)), var, 1, _TAGS_THREAD[axis])
            thread_ivs.append((iv, extent))
        tid = thread_ivs[0][0].var
        stride = threads[0]
        for iv, extent in thread_ivs[1:]:
            tid = tid + iv.var * stride
            stride *= extent
        bound = {str(iv.thread_tag): iv.var for iv, _ in thread_ivs}
        thread_vars = [bound.get(tag) for tag in _TAGS_THREAD]
        inner_ctx = _Ctx(kernel={"loc": loc, "tid": tid, "threads": total, "blocks": [lp.loop_var for lp in loops],
                                 "block_loops": list(loops),
                                 "thread_vars": thread_vars, "body": body,
                                 "nests": plan_parallel_locals(body, total, loc)})
        new_body = self.visit(body, inner_ctx)
        new_body = _bind_indices(new_body, thread_vars, "thread_binding")
        refuse_partial_warps(new_body, total, loc)  # full-warp shuffles and barriers (lowering/warp.py)
        new_body = resolve_thread_indices(new_body, tid)  # T.get_lane_idx & co. (lowering/warp.py)
        block_ivs = []
        mapping = []
        grid = []
        for axis, loop in enumerate(loops):
            var = tirx.Var(_TAGS_BLOCK[axis], "int32")
            # CUDA grids are 32-bit: an int64 extent (a size from an int64 scalar) is narrowed, and
            # the body keeps seeing its block index in the dtype it was written with
            extent = loop.extent if str(loop.extent.ty.dtype) == "int32" else tirx.Cast("int32", loop.extent)
            iv = tirx.IterVar(tvm.ir.Range(0, extent), var, 1, _TAGS_BLOCK[axis])
            block_ivs.append(iv)
            grid.append(extent)
            index_dtype = str(loop.loop_var.ty.dtype)
            mapping.append((loop.loop_var, var if index_dtype == "int32" else tirx.Cast(index_dtype, var)))
        new_body = substitute(new_body, mapping)
        new_body = _bind_indices(new_body, [iv.var for iv in block_ivs] + [None] * (3 - len(block_ivs)), "block_binding")
        for iv, extent in reversed(thread_ivs):
            new_body = tirx.AttrStmt(iv, "thread_extent", _as_expr(extent), new_body)
        for iv, extent in reversed(list(zip(block_ivs, grid))):
            new_body = tirx.AttrStmt(iv, "thread_extent", extent, new_body)
        return new_body

    def _kernel_cpu(self, loops: list, threads: list, body: Any, loc: str, ctx: _Ctx) -> Any:
        inner_ctx = _Ctx(kernel={"loc": loc, "tid": None, "threads": 1, "blocks": [lp.loop_var for lp in loops],
                                 "block_loops": list(loops)})
        new_body = self.visit(body, inner_ctx)
        if any(_int(lp.extent) is not None and _int(lp.extent) <= 0 for lp in loops):
            # an empty grid (T.Kernel(0), T.Kernel(4, 0)) runs no block; its body was still checked.
            # The flat block index of a 2-D grid would be split by the axis extents, 0 here.
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        # Atomics are real atomics on CPU (lowering/atomics.py): blocks may update the same element.
        parallel = self.opt.parallel_blocks
        if len(loops) == 1:
            loop = loops[0]
            block_var = loop.loop_var
            extent = _int32_safe(loop.extent)
        else:
            # The blocks of a 2-D/3-D grid are one flat loop. Its extent, the product of the
            # axes', exceeds int32 for valid grids (65536 x 32769): unless the product is a
            # small constant, the flat index is int64 and each axis index is narrowed from it.
            extents = [loop.extent for loop in loops]
            statics = [_int(e) for e in extents]
            wide = None in statics or math.prod(statics) > INT32_MAX
            if wide:
                extents = [to_int64(e) for e in extents]
            block_var = tirx.Var("block_idx", "int64" if wide else "int32")
            # A run-time extent counts max(e, 0) blocks (two negative extents made a positive
            # product: T.Kernel(n - 5, m - 5) ran 4 blocks for n = m = 3), and divides the flat
            # index as max(e, 1): equal to e whenever a block runs, and provably not 0 or -1, so
            # lowering/checked_divisions.py puts no check on it (a check there stopped llvm's
            # bound analysis in its never-taken "e == 0" branch).
            counts = [e if _int(e) is not None else tirx.Max(e, tirx.const(0, str(e.ty.dtype))) for e in extents]
            divisors = [e if _int(e) is not None else tirx.Max(e, tirx.const(1, str(e.ty.dtype))) for e in extents]
            extent = counts[0]
            for e in counts[1:]:
                extent = extent * e
            mapping = []
            stride = None
            for loop, e in zip(loops, divisors):
                value = block_var if stride is None else tirx.floordiv(block_var, stride)
                if loop is not loops[-1]:
                    value = tirx.floormod(value, e)
                if wide:
                    value = tirx.Cast(str(loop.loop_var.ty.dtype), value)
                mapping.append((loop.loop_var, value))
                stride = e if stride is None else stride * e
            new_body = substitute(new_body, mapping)
        return self._cpu_block_loop(block_var, extent, new_body, parallel)

    def _cpu_block_loop(self, block_var: Any, extent: Any, body: Any, parallel: bool) -> Any:
        """The loop over a CPU kernel's blocks: serial, or parallel (see the module docstring)."""
        serial = tirx.For(block_var, _as_expr(0), extent, tirx.ForKind.SERIAL, body)
        if not parallel:
            return serial
        work = block_work(extent, body, block_var)
        static_work, static_blocks = _int(work), _int(extent)
        if (static_blocks is not None and static_blocks < 2) or (static_work is not None and static_work < PARALLEL_MIN_WORK):
            return serial
        annotations = {BLOCK_LOOP_KEY: work} if self.opt.emit_pragmas else None
        loop = tirx.For(block_var, _as_expr(0), extent, tirx.ForKind.PARALLEL, body, None, annotations)
        if self.opt.emit_pragmas or static_work is not None:
            return loop
        # runtime modules: the work is known at call time only; the serial copy is made SSA again
        # by the pass list (ConvertSSA)
        return tirx.IfThenElse(work >= tirx.IntImm("int64", PARALLEL_MIN_WORK), loop, serial)

    # -- T.finalize_reducer -------------------------------------------------------------------
    def finalize_reducer(self, stmt: Any, ctx: _Ctx) -> Any:
        """Combine the per-thread copies of a reducer (GPU: through shared memory; CPU: one copy).

        Every thread writes its copy into a shared scratch of ``threads * numel`` elements, and
        after a barrier every thread combines all the copies into its own, so each one holds the
        result (TileLang's replication "all").
        """
        op, loc, acc = _reducer_finalize(stmt)
        if not self.opt.gpu or ctx.kernel is None or ctx.kernel["threads"] == 1:
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        if ctx.in_parallel:
            raise LoweringError(f"{loc}: T.finalize_reducer inside a T.Parallel loop: call it after the loop")
        from ..language.tileops.reducer import combine

        shape = [_int(d) for d in acc.ty.shape]
        if any(d is None for d in shape):
            raise LoweringError(f"{loc}: the reducer '{acc}' needs a static shape on GPU targets, got {list(acc.ty.shape)}")
        numel = 1
        for d in shape:
            numel *= d
        threads, tid = ctx.kernel["threads"], ctx.kernel["tid"]
        dtype = str(acc.ty.dtype)
        scratch = tirx.decl_buffer([threads * numel], dtype, name=f"{acc}_partials", scope="shared")

        def element(k):
            idx, rest = [], k
            for d in reversed(shape):
                idx.append(tirx.floormod(rest, d) if d != 1 else _as_expr(0))
                rest = tirx.floordiv(rest, d)
            return list(reversed(idx))

        sync = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", tvm.ir.StringImm("shared")))
        k1 = tirx.Var("reducer_k", "int32")
        write = tirx.For(k1, _as_expr(0), _as_expr(numel), tirx.ForKind.SERIAL,
                         tirx.BufferStore(scratch, acc[tuple(element(k1))], [k1 * threads + tid]))
        k2, t = tirx.Var("reducer_k", "int32"), tirx.Var("reducer_t", "int32")
        idx = element(k2)
        fold = tirx.For(t, _as_expr(1), _as_expr(threads - 1), tirx.ForKind.SERIAL,
                        tirx.BufferStore(acc, combine(op, acc[tuple(idx)], scratch[k2 * threads + t]), idx))
        gather = tirx.For(k2, _as_expr(0), _as_expr(numel), tirx.ForKind.SERIAL,
                          _seq([tirx.BufferStore(acc, scratch[k2 * threads], idx), fold]))
        return tirx.SeqStmt([tirx.AllocBuffer(scratch), write, sync, gather])

    # -- T.Parallel --------------------------------------------------------------------------
    def visit_parallel(self, loop: Any, ndim: int, ctx: _Ctx) -> Any:
        """Rewrite the ``ndim`` nested loops of one ``T.Parallel`` (see the module docstring)."""
        loops = parallel_loops(loop, ndim)
        if len(loops) < ndim:
            raise LoweringError(f"{self.opt.func_location}: malformed T.Parallel loop nest")
        body = loops[-1].body
        if ctx.safe_values:
            body = _guard_safe_loads(body, ctx.safe_values)
        if self.opt.gpu:
            return self._parallel_gpu(loops, body, ctx)
        return self._serial_nest(loops, body, ctx)

    def _serial_nest(self, loops: list, body: Any, ctx: _Ctx) -> Any:
        """The nest as serial loops: every CPU nest, and a GPU nest that runs whole in every thread."""
        inner_ctx = _Ctx(kernel=ctx.kernel, in_parallel=True, safe_values=ctx.safe_values)
        new_body = self.visit(body, inner_ctx)
        simd_ok = (
            self.opt.emit_pragmas
            and self.opt.simd
            and not contains(new_body, (tirx.For, tirx.While, tirx.Evaluate, tirx.AllocBuffer))
            # several iterations may update the same element: never vectorize atomics
            and not contains_atomics(new_body)
            and not strided_self_update(new_body, loops[-1].loop_var)
        )
        stmt = new_body
        for depth, loop in enumerate(reversed(loops)):
            stmt = tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, stmt)
            if depth == 0 and simd_ok:
                stmt = _seq([_pragma("omp simd", str(loop.loop_var)), stmt])
        return stmt

    def _parallel_gpu(self, loops: list, body: Any, ctx: _Ctx) -> Any:
        if ctx.kernel is None:
            raise LoweringError(
                f"{self.opt.func_location}: T.Parallel on a GPU target must be inside a T.Kernel "
                "(its iterations are spread over the kernel's threads)"
            )
        if ctx.in_parallel:
            raise LoweringError(
                f"{ctx.kernel['loc']}: T.Parallel nested inside T.Parallel is not supported on GPU "
                "targets; merge them into one T.Parallel(M, N)"
            )
        if ctx.kernel["nests"].runs_per_thread(loops[0]):  # only local tiles written: whole in every thread
            return self._serial_nest(loops, body, ctx)
        inner_ctx = _Ctx(kernel=ctx.kernel, in_parallel=True, safe_values=ctx.safe_values)
        new_body = self.visit(body, inner_ctx)
        threads = ctx.kernel["threads"]
        tid = ctx.kernel["tid"]
        total_int = static_count(loops)
        total: Any = total_int
        if total_int is None:
            total = 1
            for loop in loops:
                total = total * loop.extent if not (isinstance(total, int) and total == 1) else loop.extent
        name = "_".join(str(loop.loop_var) for loop in loops) + "_flat"
        direct = total_int is not None and total_int <= threads
        flat = tid if direct else tirx.Var(name, "int32")
        guarded = substitute(new_body, loop_values(loops, flat))  # the order parallel_locals proves with
        needs_guard = total_int is None or total_int % threads != 0
        if needs_guard:
            refuse_under_guard(new_body, total, threads)  # barriers, warp reductions (lowering/warp.py)
            guarded = tirx.IfThenElse(flat < _as_expr(total), guarded, None)
        if direct:
            return guarded
        it = tirx.Var(name + "_outer", "int32")
        count = (total_int + threads - 1) // threads if total_int is not None else tirx.ceildiv(total, threads)
        loop_body = _seq([tirx.Bind(flat, it * threads + tid), guarded])
        return tirx.For(it, _as_expr(0), _as_expr(count), tirx.ForKind.SERIAL, loop_body)


def block_work(blocks: Any, body: Any, block_var: Any = None) -> Any:
    """Estimated work of a CPU block loop, as an int64 expression over the kernel's symbols.

    ``blocks`` times the number of statement executions in one block: every store or evaluated
    call counts 1, a loop multiplies its body by its extent, both branches of an ``if`` count.
    Extents that depend on variables of the block (its index, inner loop variables) or read
    memory (a shared tile of the block, say) count as 1.
    Only the order of magnitude matters: the estimate decides between a serial and a parallel
    block loop (:data:`PARALLEL_MIN_WORK`).
    """
    local: list = [block_var] if block_var is not None else []

    def collect_loop(node):
        local.append(node.loop_var)
        return node

    def collect_bind(node):
        local.append(node.var)
        return node

    tvm_ffi.structural_map(body, [(tirx.For, collect_loop), ((tirx.Bind, tirx.LetStmt), collect_bind)])

    def outer_only(expr) -> bool:
        uses, loads = [], []

        def visit(v):
            uses.append(v)
            return v

        def visit_load(load):
            loads.append(load)
            return load

        tvm_ffi.structural_map(expr, [(tvm.ir.Var, visit), (tvm.ir.TensorLoad, visit_load)])
        # a load reads memory that may be the block's own (a shared tile), so only the block knows it
        return not loads and not any(u.same_as(v) for u in uses for v in local)

    def i64(expr):
        return tirx.Cast("int64", expr) if str(expr.ty.dtype) != "int64" else expr

    def cost(stmt) -> Any:
        if isinstance(stmt, tirx.SeqStmt):
            total = tirx.IntImm("int64", 0)
            for s in stmt.seq:
                total = total + cost(s)
            return total
        if isinstance(stmt, tirx.For):
            inner = cost(stmt.body)
            extent = stmt.extent
            return i64(extent) * inner if outer_only(extent) else inner
        if isinstance(stmt, tirx.IfThenElse):
            other = cost(stmt.else_case) if stmt.else_case is not None else tirx.IntImm("int64", 0)
            return cost(stmt.then_case) + other
        child = getattr(stmt, "body", None)  # attributes, lets, allocations: their body's cost
        if isinstance(child, tirx.Stmt):
            return cost(child)
        return tirx.IntImm("int64", 1)

    blocks_expr = i64(_as_expr(blocks))
    work = blocks_expr * cost(body)
    return tvm.sym.Analyzer().simplify(work)


def lower_tile_constructs(func: tirx.PrimFunc, options: FrontendOptions) -> tirx.PrimFunc:
    """Apply :class:`Frontend` to ``func`` (see the module docstring). On CPU targets with
    ``simd``, a ``T.gemm`` reading B transposed (or, on target ``c``, a float16 B widened to float)
    first copies it into a tile read along C's rows;
    then, on the CPU runtime-module path (target ``llvm``: no ``emit_pragmas``), each ``T.gemm``
    runs in vectorized groups of rows of C (lowering/cpu_gemm_tiles.py); elsewhere its mark is
    dropped."""
    from .cpu_gemm_tiles import copy_gemm_operands, strip_gemm_marks, tile_gemms

    if not options.gpu and options.simd:  # B read contiguously (both CPU targets), widened on c
        func = copy_gemm_operands(func, widen_float16=options.emit_pragmas)
    if options.gpu or options.emit_pragmas or not options.simd:
        return Frontend(options).run(strip_gemm_marks(func))
    return Frontend(options).run(tile_gemms(func))
