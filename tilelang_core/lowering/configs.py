"""Pass configs: the documented keys, TileLang's keys, ``PassConfigKey`` (imports no TVM).

Three kinds of keys are accepted in ``pass_configs`` (see docs/pipeline.md):

- :data:`PASS_CONFIGS`: this pipeline's own ``tl.*`` keys, booleans, honoured on every target;
- TVM's own ``tirx.*`` keys: passed to TVM's ``PassContext`` (TVM validates them);
- :data:`NO_EFFECT`: keys of upstream TileLang's compiler that name passes or checks this
  pipeline does not have (TMA, warp specialization, layout inference, IR dumps, ...). They are
  accepted so TileLang code runs unchanged, have no effect on any target, and each one's entry
  says why.

Anything else is an error that lists the known keys (:func:`unknown_key_message`).
"""

from __future__ import annotations

import difflib
from enum import Enum
from typing import Any, Mapping

#: Documented pass configs: key -> (default, one-line description).
PASS_CONFIGS: dict[str, tuple[Any, str]] = {
    "tl.disable_vectorize": (
        False,
        "Do not vectorize: no '#pragma omp simd' in C sources, no vectorized loops on GPU/LLVM.",
    ),
    "tl.disable_cse": (False, "Skip common subexpression elimination (no cse_v* temporaries)."),
    "tl.disable_bounds_assert": (
        False,
        "Drop runtime checks: the symbol checks of C entry functions and the argument asserts "
        "of the packed host function of runtime modules.",
    ),
    "tl.disable_parallel_blocks": (
        False,
        "CPU targets: run the blocks of T.Kernel in a serial loop (no '#pragma omp parallel for', "
        "no parallel loop in runtime modules).",
    ),
    "tl.disable_safe_memory_legalize": (
        False,
        "Do not guard the kernel's own accesses of global memory that may leave their tensor "
        "(stores and atomics skipped, loads giving 0 outside it); the tile operators keep their guards.",
    ),
    "tl.config_index_bitwidth": (
        32,
        "Index arithmetic: 32 (64 bits only for tensors whose static size needs it; tensors with "
        "dynamic shapes get a call-time size limit) or 64 (every tensor, no limit).",
    ),
}

#: Documented configs whose values are not bools: key -> allowed values.
CHOICE_CONFIGS: dict[str, tuple[Any, ...]] = {"tl.config_index_bitwidth": (32, 64)}

_GPU_ONLY = "a feature of upstream TileLang's CUDA code generation that this pipeline does not implement"
_NO_CHECK = "a check upstream TileLang runs and this pipeline does not, so there is nothing to disable"
_DEBUG = "a debugging output of upstream TileLang's compiler that this pipeline does not produce"
_SIMPLIFY = "an option of upstream TileLang's own simplifier; this pipeline runs TVM's StmtSimplify with its defaults"

#: Upstream TileLang keys accepted without effect, key -> why it has none.
NO_EFFECT: dict[str, str] = {
    "tl.Simplify": _SIMPLIFY,
    "transitively_prove_inequalities": _SIMPLIFY,
    "convert_boolean_to_and_of_ors": _SIMPLIFY,
    "apply_constraints_to_boolean_branches": _SIMPLIFY,
    "propagate_knowns_to_prove_conditional": _SIMPLIFY,
    "propagate_knowns_to_simplify_expressions": _SIMPLIFY,
    "enable_simplify_let_inline": _SIMPLIFY,
    "tl.force_let_inline": _SIMPLIFY,
    "tirx.Simplify": _SIMPLIFY + " (TVM 0.27 names its simplifier tirx.StmtSimplify)",
    "tl.disable_buffer_init_check": _NO_CHECK,
    "tl.disable_data_race_check": _NO_CHECK,
    "tl.disable_prelower_semantic_check": _NO_CHECK,
    "tl.disable_out_of_bound_warning": _NO_CHECK,
    "tl.disable_warp_specialized": _GPU_ONLY + " (warp specialization)",
    "tl.enable_auto_warp_specialization": _GPU_ONLY + " (warp specialization)",
    "tl.enable_auto_schedule": "upstream's automatic scheduling, which this pipeline does not have",
    "tl.disable_tma_lower": _GPU_ONLY + " (TMA copies)",
    "tl.disable_wgmma": _GPU_ONLY + " (WGMMA instructions)",
    "tl.enable_async_copy": _GPU_ONLY + " (cp.async copies)",
    "tirx.use_async_copy": _GPU_ONLY + " (cp.async copies)",
    "tl.enable_lower_ldgstg": _GPU_ONLY + " (ldg/stg instruction selection)",
    "tl.enable_lower_ldgstg_predicated": _GPU_ONLY + " (ldg/stg instruction selection)",
    "tl.disable_vectorize_256": _GPU_ONLY + " (256-bit vector loads)",
    "tl.enable_fp32x2_reduction": _GPU_ONLY + " (packed fp32x2 reductions)",
    "tl.disable_shuffle_elect": _GPU_ONLY + " (shuffle-based leader election)",
    "tl.ptxas_register_usage_level": _GPU_ONLY + " (ptxas register hints)",
    "tl.device_compile_flags": "flags for upstream's nvcc invocation; pass compile_flags= to tilelang.compile instead",
    "tl.enable_fast_math": "math stays IEEE-exact here: fast-math variants are chosen per call (T.__exp, ...), "
    "not by a global switch",
    "tl.layout_cost_model": "upstream's layout inference, which this pipeline does not have",
    "tl.reducer_force_baseline": "upstream's reducer planning, which this pipeline does not have",
    "tl.enable_reducer_plan_verbose": _DEBUG,
    "tl.enable_vectorize_planner_verbose": _DEBUG,
    "tl.debug_merge_shared_memory_allocations": _DEBUG,
    "tl.enable_aggressive_shared_memory_merge": "upstream's shared-memory planner options; this pipeline uses TVM's "
    "MergeSharedMemoryAllocations with its defaults",
    "tl.disable_shared_memory_reuse": "upstream's shared-memory planner options; this pipeline uses TVM's "
    "MergeSharedMemoryAllocations with its defaults",
    "tl.disable_loop_unswitching": "upstream's loop unswitching pass, which this pipeline does not run",
    "tl.loop_unswitching_allow_non_trivial_else": "upstream's loop unswitching pass, which this pipeline does not run",
    "tl.if_stmt_binding_inline_replayable_binds": "upstream's if-statement binding pass, which this pipeline does not run",
    "tl.disable_thread_storage_sync": "upstream's own barrier insertion; this pipeline inserts barriers with TVM's "
    "ThreadSync, which has no switch",
    "tl.storage_rewrite_detect_inplace": "upstream's storage rewrite option; this pipeline uses TVM's StorageRewrite",
    "tl.emit_line_directives": _DEBUG + " (#line directives)",
    "tl.ast_print_enable": _DEBUG,
    "tl.layout_visualization_enable": _DEBUG,
    "tl.layout_visualization_formats": _DEBUG,
    "tl.enable_dump_ir": _DEBUG,
    "tl.dump_ir_path": _DEBUG,
    "tl.pass_profile": _DEBUG,
    "tl.pass_profile_threshold_ms": _DEBUG,
    "tir.enable_equiv_terms_in_cse_tir": "an option of upstream's CSE pass; use tl.disable_cse to switch CSE off",
    "cuda.kernels_output_dir": _DEBUG + " (CUDA sources on disk; use kernel.get_kernel_source())",
}


class PassConfigKey(str, Enum):
    """Names of pass-config keys, as TileLang spells them (``tilelang.PassConfigKey``).

    Each member *is* its key string (``PassConfigKey.TL_DISABLE_VECTORIZE == "tl.disable_vectorize"``),
    so members and strings can be mixed in ``pass_configs``. What each key does, or why it has
    no effect, is in docs/pipeline.md.
    """

    # honoured by this pipeline
    TL_DISABLE_VECTORIZE = "tl.disable_vectorize"
    TL_DISABLE_CSE = "tl.disable_cse"
    TL_DISABLE_BOUNDS_ASSERT = "tl.disable_bounds_assert"
    TL_DISABLE_PARALLEL_BLOCKS = "tl.disable_parallel_blocks"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    # TVM's own, passed to TVM
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    # accepted without effect (NO_EFFECT says why)
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TIR_SIMPLIFY = "tirx.Simplify"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"

    def __str__(self) -> str:
        return self.value


def config_key(key: Any) -> Any:
    """A ``pass_configs`` key as a plain string (a :class:`PassConfigKey` member becomes its value)."""
    if isinstance(key, PassConfigKey):
        return key.value
    return key


def unknown_key_message(key: str) -> str:
    """The error message for an unknown ``pass_configs`` key: close matches, then every known key."""
    known = sorted(PASS_CONFIGS) + sorted(NO_EFFECT)
    close = difflib.get_close_matches(key, known + [k.value for k in PassConfigKey if k.value.startswith("tirx.")], n=3)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return (
        f"unknown pass config {key!r}{hint}; known keys: {', '.join(sorted(PASS_CONFIGS))} (honoured), "
        f"{', '.join(sorted(NO_EFFECT))} (TileLang keys accepted without effect, see docs/pipeline.md); "
        "TVM's own 'tirx.*' options are passed through"
    )


def config_flag(configs: Mapping[str, Any], key: str) -> bool:
    """Value of a boolean documented pass config (its default when absent)."""
    return bool(configs.get(key, PASS_CONFIGS[key][0]))
