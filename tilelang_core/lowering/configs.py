"""Documented pass configs (importing this module does not import TVM)."""

from __future__ import annotations

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
    "tl.config_index_bitwidth": (
        32,
        "Index arithmetic: 32 (64 bits only for tensors whose static size needs it; tensors with "
        "dynamic shapes get a call-time size limit) or 64 (every tensor, no limit).",
    ),
}

#: Documented configs whose values are not bools: key -> allowed values.
CHOICE_CONFIGS: dict[str, tuple[Any, ...]] = {"tl.config_index_bitwidth": (32, 64)}


def config_flag(configs: Mapping[str, Any], key: str) -> bool:
    """Value of a boolean documented pass config (its default when absent)."""
    return bool(configs.get(key, PASS_CONFIGS[key][0]))
