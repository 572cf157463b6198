"""The pass lists of every target family, in the order they run. Read top to bottom.

Every list starts after :func:`tilelang_core.lowering.frontend.lower_tile_constructs` (which
turned ``T.Kernel``/``T.Parallel`` into plain TIR for the family) and after ``BindTarget``.

Families:

* **CPU device source** (target ``c``, consumer ``device_source``): :func:`cpu_source_passes`,
  then :mod:`tilelang_core.lowering.codegen` wraps the function into a plain C entry point
  (typed pointers and scalars, no TVM packed API), runs :func:`cpu_source_finalize_passes` and
  TVM's C code generator on it.
* **GPU** (``cuda``, ``metal``, ...): :func:`gpu_passes` up to and including ``SplitHostDevice``,
  then :func:`gpu_device_finalize_passes` on the device functions (source code generation), or
  :func:`host_packed_passes` + :func:`host_finalize_passes` on the host function when a
  ``runtime_module`` is wanted.
* **CPU runtime module** (``llvm``, ``c`` consumer ``runtime_module``): :func:`cpu_runtime_passes`
  (the CPU source list plus the packed API) and :func:`host_finalize_passes`.

Pass configs (``pass_configs`` of ``lower``/``compile``) are read here and nowhere else, except
``tl.disable_parallel_blocks`` and ``tl.disable_vectorize`` that also shape the frontend step.
"""

from __future__ import annotations

from typing import Any, Mapping

import tvm
from tvm import s_tir, tirx

from .configs import PASS_CONFIGS, config_flag  # noqa: E402,F401 - re-exported
from .bfloat16_rounding import ExpandBFloat16Rounding, RoundBFloat16
from .float16_rounding import Float16RoundedPerOp
from .minus_one_divisors import MinusOneDivisors
from .narrow_divisions import WidenNarrowDivisions
from .gpu_math import GpuMathPass
from .barriers import StripBarriers
from .float_identities import GuardFloatIdentities
from .unsigned_compares import GuardUnsignedCompares
from .kept_effects import GuardSideEffects
from .fragments import FragmentLayoutPass
from .vectorized_locals import ExpandVectorizedLocals, InlineVectorizedScalars
from .vector_lane_collisions import LaneCollisionsSerial
from .vector_lanes import RunTimeVectorsSerial, SplitWideVectors, VectorLoopsForLlvm
from .tile_sizes import CheckTileSizes
from .condition_loads import HoistConditionLoads
from .shared_hazards import DropSameThreadSyncs, PlanSharedBarriers, UnmarkUniformConditions
from .dynamic_unroll import unroll_loops
from .warp import NamedBarriers
from .thread_allreduce import ResolveAllreduceThreads
from .pdl import PdlSyncKernels
from .access_ptr import LowerAccessPtr
from .narrowing import NarrowDataType32
from .packed_reductions import PackHalfReductions
from .float8_cuda import Float8ComputeLegalize, Float8StorageLegalize
from .constant_casts import FoldConstantReinterprets
from .shift_amounts import DefinedShifts
from .vector_not import VectorBitwiseNot


def _bf16_compute() -> list:
    """bfloat16 computed in float32 where the target has no bfloat16 arithmetic (TVM's
    ``BF16ComputeLegalize``), every bfloat16 value rounded where it is made first
    (lowering/bfloat16_rounding.py: the legalizer alone rounds only at stores). The float
    identities are guarded before them too (float_identities.py): the legalizer rebuilds each
    float32 operation on a legalized bfloat16 operand with TVM's folding constructors, and so
    folded ``x * 0.0``, ``0.0 / x`` and ``x + 0.0`` of a bfloat16 ``x`` before any guard ran."""
    return [GuardFloatIdentities(), RoundBFloat16(), tirx.transform.BF16ComputeLegalize(), ExpandBFloat16Rounding()]


def _simplifier_guards() -> list:
    """What must survive the ``StmtSimplify`` that follows: calls with a side effect are not folded
    away (``bump(p) * 0``, ``f(p) - f(p)``; kept_effects.py), and floats get no real-number rules
    (``x - x``, ``(x + y) - x``, ``x != x``; float_identities.py)."""
    return [GuardSideEffects(), GuardFloatIdentities(), GuardUnsignedCompares()]


def _lower_intrin() -> list:
    """TVM's ``LowerIntrin`` of CPU and host code, every float16 operation rounded to float16 first
    (lowering/float16_rounding.py: C compilers keep float16 arithmetic in float, and ``LowerIntrin``
    would fuse a float16 ``a * b + c`` on ``llvm``), integer divisions by -1 without a ``let``
    (lowering/minus_one_divisors.py), int8/int16 divisions in int32 (``MIN // -1`` trapped on
    ``llvm``; lowering/narrow_divisions.py)."""
    return [Float16RoundedPerOp(), MinusOneDivisors(), WidenNarrowDivisions(), tirx.transform.LowerIntrin()]


def _cse(configs: Mapping[str, Any]) -> list:
    return [] if config_flag(configs, "tl.disable_cse") else [tirx.transform.CommonSubexprElim()]


def cpu_source_passes(configs: Mapping[str, Any]) -> tvm.transform.Pass:
    """CPU device source: TIR -> flat, simplified TIR that TVM's C code generator prints."""
    passes = [
        LowerAccessPtr(),  # T.access_ptr -> tvm_access_ptr (lowering/access_ptr.py)
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        *_bf16_compute(),
        NarrowDataType32(),  # not for loops of 2**31 iterations (lowering/narrowing.py)
        DefinedShifts(),  # shifts by amounts outside 0..width-1: one value on every target (shift_amounts.py)
        *_simplifier_guards(),
        tirx.transform.StmtSimplify(),
        CheckTileSizes(gpu=False),  # a tile of 0 elements once simplified (bx of a one-block grid) (tile_sizes.py)
        # Vectorized loops become serial: the C source expresses SIMD with '#pragma omp simd'.
        tirx.transform.VectorizeLoop(False),
        unroll_loops(gpu=False),  # UnrollLoop, run-time extents too (dynamic_unroll.py)
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveAssume(),  # T.assume informs the simplifier above; code generators print no assume
        tirx.transform.RemoveNoOp(),
        *_cse(configs),
        tirx.transform.VerifyMemory(),
    ]
    return tvm.transform.Sequential(passes, name="tl.cpu_source")


def cpu_source_finalize_passes() -> tvm.transform.Pass:
    """CPU device source, after the function became a plain C entry (pointer parameters)."""
    return tvm.transform.Sequential(
        [
            tirx.transform.BF16StorageLegalize(),
            FoldConstantReinterprets(),  # bfloat16 constants stored: no address of a constant (constant_casts.py)
            *_lower_intrin(),
            StripBarriers(),  # barriers.py (float_identities.py, kept_effects.py): after the last simplification
        ],
        name="tl.cpu_source_finalize",
    )


def cpu_runtime_passes(configs: Mapping[str, Any], vector_types: bool = True) -> tvm.transform.Pass:
    """CPU runtime module: same optimisations, then TVM's packed calling convention.

    ``vector_types=False`` (target ``c``: TVM's C host code generator prints vector types C does
    not have, ``int32_t4``) makes vectorized loops serial; the C compiler vectorizes them.
    """
    vectorize = vector_types and not config_flag(configs, "tl.disable_vectorize")
    passes = [
        tirx.transform.ConvertSSA(),  # the frontend may emit a block loop twice (serial/parallel)
        LowerAccessPtr(),  # T.access_ptr -> tvm_access_ptr (lowering/access_ptr.py)
        s_tir.transform.LowerOpaqueBlock(),
        InlineVectorizedScalars(),  # lowering/vectorized_locals.py
        tirx.transform.FlattenBuffer(),
        ExpandVectorizedLocals(),
        *_bf16_compute(),
        NarrowDataType32(),  # not for loops of 2**31 iterations (lowering/narrowing.py)
        DefinedShifts(),  # shifts by amounts outside 0..width-1: one value on every target (shift_amounts.py)
        *_simplifier_guards(),
        tirx.transform.StmtSimplify(),
        CheckTileSizes(gpu=False),  # a tile of 0 elements once simplified (bx of a one-block grid) (tile_sizes.py)
        RunTimeVectorsSerial(),  # T.vectorized(n) of a run-time n: a serial loop (vector_lanes.py)
        LaneCollisionsSerial(),  # lanes that store to one element or read another's: serial (vector_lane_collisions.py)
        # llvm: vectorized loops run 256 lanes at a time (65537 wrapped to 1) from 0 (vector_lanes.py)
        *([VectorLoopsForLlvm()] if vectorize else []),
        tirx.transform.VectorizeLoop(vectorize),
        unroll_loops(gpu=False),
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveAssume(),  # T.assume informs the simplifier above; code generators print no assume
        tirx.transform.RemoveNoOp(),
        *_cse(configs),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
        tirx.transform.BF16StorageLegalize(),
        FoldConstantReinterprets(),  # bfloat16 constants stored: no address of a constant (constant_casts.py)
    ]
    if config_flag(configs, "tl.disable_bounds_assert"):
        passes.append(tirx.transform.SkipAssert())
    return tvm.transform.Sequential(passes, name="tl.cpu_runtime")


def gpu_passes(configs: Mapping[str, Any]) -> tvm.transform.Pass:
    """GPU: TIR with thread bindings -> host function + device kernels (``SplitHostDevice``)."""
    passes = [
        ResolveAllreduceThreads(),  # T.tvm_thread_allreduce of a name given T.get_thread_binding (thread_allreduce.py)
        FragmentLayoutPass(),  # GPU fragments spread over the block's threads, atomics (lowering/fragments.py)
        LowerAccessPtr(),  # T.access_ptr -> tvm_access_ptr, once fragments have their place (lowering/access_ptr.py)
        GpuMathPass(),  # bit counts of every integer width, 16-bit float math without a GPU rule (lowering/gpu_math.py)
        s_tir.transform.LowerOpaqueBlock(),
        InlineVectorizedScalars(),  # one value per lane in T.vectorized loops (lowering/vectorized_locals.py)
        tirx.transform.FlattenBuffer(),
        ExpandVectorizedLocals(),
        PackHalfReductions(),  # CUDA: per-thread float16/bfloat16 max/min two lanes at a time (packed_reductions.py)
        *_bf16_compute(),
        NarrowDataType32(),  # not for loops of 2**31 iterations (lowering/narrowing.py)
        DefinedShifts(),  # shifts by amounts outside 0..width-1: one value on every target (shift_amounts.py)
        *_simplifier_guards(),
        tirx.transform.StmtSimplify(),
        CheckTileSizes(gpu=True),  # local/shared tiles of 0 elements or of a run-time size (tile_sizes.py)
        RunTimeVectorsSerial(),  # T.vectorized(n) of a run-time n: a serial loop (vector_lanes.py)
        LaneCollisionsSerial(),  # lanes that store to one element or read another's: serial (vector_lane_collisions.py)
        # CUDA: vectorized loops split into vectors its code generator prints right (vector_lanes.py)
        *([] if config_flag(configs, "tl.disable_vectorize") else [SplitWideVectors()]),
        tirx.transform.VectorizeLoop(not config_flag(configs, "tl.disable_vectorize")),
        tirx.transform.StorageRewrite(),
        unroll_loops(gpu=True),
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveAssume(),  # T.assume informs the simplifier above; code generators print no assume
        tirx.transform.RemoveNoOp(),
        Float8ComputeLegalize(),  # CUDA: __nv_fp8_* on every arch, arithmetic in float32 (float8_cuda.py); TVM's elsewhere
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        HoistConditionLoads(),  # shared reads in if/while conditions and loop bounds: where ThreadSync sees them (condition_loads.py)
        PlanSharedBarriers(),  # barriers ThreadSync misses: write after write, views of another dtype size (shared_hazards.py)
        s_tir.transform.ThreadSync("shared"),
        s_tir.transform.ThreadSync("shared.dyn"),
        DropSameThreadSyncs(),  # the syncs PlanSharedBarriers left for ThreadSync in one-thread code print nothing (shared_hazards.py)
        s_tir.transform.ThreadSync("warp"),
        UnmarkUniformConditions(),  # the block-uniform if/while conditions PlanSharedBarriers marked for ThreadSync, as written
        NamedBarriers(),  # T.sync_threads(id, count): bar.sync, once ThreadSync has counted it (lowering/warp.py)
        s_tir.transform.LowerThreadAllreduce(),
        s_tir.transform.MergeSharedMemoryAllocations(),
        tirx.transform.SplitHostDevice(),
        # After the split: before it, CSE can bind an expression the host and a kernel share
        # (``n + 2`` of a grid size and a bound) to a variable that becomes a kernel argument
        # no KernelArg can describe.
        *_cse(configs),
    ]
    return tvm.transform.Sequential(passes, name="tl.gpu")


def gpu_device_finalize_passes() -> tvm.transform.Pass:
    """GPU device functions, right before source code generation."""
    return tvm.transform.Sequential(
        [
            Float8StorageLegalize(),
            tirx.transform.BF16StorageLegalize(),
            FoldConstantReinterprets(),  # bfloat16 constants stored: no address of a constant (constant_casts.py)
            VectorBitwiseNot(),  # ~ of an integer vector as ^ all-ones: CUDA's vector types have no ~ (vector_not.py)
            tirx.transform.LowerWarpMemory(),
            tirx.transform.StmtSimplify(),
            tirx.transform.LowerIntrin(),
            StripBarriers(),  # barriers.py (float_identities.py, kept_effects.py): after the last simplification
            PdlSyncKernels(),  # kernels with T.pdl_sync: no __restrict__, no __ldg (lowering/pdl.py)
        ],
        name="tl.gpu_device_finalize",
    )


def host_packed_passes(configs: Mapping[str, Any]) -> tvm.transform.Pass:
    """GPU host function of a runtime module: TVM's packed calling convention."""
    passes = [
        tirx.transform.MakePackedAPI(),
        Float8StorageLegalize(),
        tirx.transform.BF16StorageLegalize(),
    ]
    if config_flag(configs, "tl.disable_bounds_assert"):
        passes.append(tirx.transform.SkipAssert())
    return tvm.transform.Sequential(passes, name="tl.host_packed")


def host_finalize_passes() -> tvm.transform.Pass:
    """Host functions of runtime modules, right before LLVM/C code generation."""
    return tvm.transform.Sequential(
        [
            tirx.transform.LowerTVMBuiltin(),
            *_lower_intrin(),
            StripBarriers(),  # barriers.py (float_identities.py, kept_effects.py): after the last simplification
        ],
        name="tl.host_finalize",
    )
