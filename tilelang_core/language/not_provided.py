"""Why a name of upstream TileLang's ``T.`` namespace is not here, for its ``AttributeError``.

A kernel written for TileLang that uses a name this package does not provide stopped with
Python's bare "module 'tilelang_core.language' has no attribute 'rng_init'". The language
module's ``__getattr__`` asks :func:`why_not_provided` and, for a name of upstream's namespace
listed here, adds the reason and what to do instead (as docs/compatibility.md gives them). The
error stays an ``AttributeError``, so ``hasattr(T, name)`` is still false.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["why_not_provided"]

_GPU_ARCH = ("a Hopper/Blackwell-specific feature of upstream's CUDA backend (TMA, WGMMA, tcgen05, TMEM, mbarriers, "
             "clusters, warp specialization, PTX wrappers); this package emits portable CUDA C through TVM's code "
             "generator: write the kernel with T.copy, T.gemm and T.Kernel (docs/compatibility.md)")
_SPARSE = "2:4 sparse tensor-core GEMM is not part of this pipeline (docs/compatibility.md)"
_RNG = "curand generator states are not part of this pipeline; pass random numbers in as a tensor (docs/compatibility.md)"
_LAUNCH = "it steers upstream's CUDA launch bounds or compiler flags, which this pipeline sets itself (docs/compatibility.md)"
_INTERNAL = "an internal module or class of upstream's own front end and code generators (docs/compatibility.md)"

#: Reasons by exact name.
_BY_NAME = {
    "Ref": "it passes a macro parameter by reference; give the macro the buffer and the index and store through "
           "them (B[i] = ...), or return the new value from the macro (y = f(x))",
    "rng_init": _RNG, "rng_rand": _RNG, "rng_rand_float": _RNG,
    "gemm_sp": _SPARSE, "wgmma_gemm_sp": _SPARSE, "tcgen05_gemm_sp": _SPARSE, "ptx_mma_sp": _SPARSE,
    "ptx_wgmma_sp_rs": _SPARSE, "ptx_wgmma_sp_ss": _SPARSE, "SparseTensorCoreIntrinEmitter": _SPARSE,
    "WGSparseTensorCoreIntrinEmitter": _SPARSE,
    "annotate_l2_hit_ratio": _LAUNCH, "annotate_min_blocks_per_sm": _LAUNCH, "annotate_compile_flags": _LAUNCH,
    "annotate_restrict_buffers": _LAUNCH,
    "CUDASourceCodeKernel": "a kernel of hand-written CUDA source; use T.import_source in a kernel instead "
                            "(docs/compatibility.md)",
    "float4_e2m1_unpacked": "TVM 0.27 has no such dtype (docs/compatibility.md)",
    "ClusterKernel": _GPU_ARCH, "WarpSpecialize": _GPU_ARCH, "WarpSpecializeFrame": _GPU_ARCH,
    "fence_proxy_async": _GPU_ARCH, "cp_async_barrier_noinc": _GPU_ARCH, "create_barriers": _GPU_ARCH,
    "create_tma_descriptor": _GPU_ARCH, "named_barrier_arrive": _GPU_ARCH, "barrier_arrive": _GPU_ARCH,
    "barrier_wait": _GPU_ARCH, "block_rank_in_cluster": _GPU_ARCH, "copy_cluster": _GPU_ARCH,
    "compute_gmma_descriptor": _GPU_ARCH, "compute_umma_descriptor": _GPU_ARCH,
    "increase_descriptor_offset": _GPU_ARCH, "gemm_blockscaled": _GPU_ARCH, "mma_gemm_blockscaled": _GPU_ARCH,
    "make_blockscaled_gemm_layout": _GPU_ARCH, "mma_fill": _GPU_ARCH, "mma_store": _GPU_ARCH,
    "mma_store_index_map": _GPU_ARCH, "get_ldmatrix_offset": _GPU_ARCH, "get_mma_micro_size": _GPU_ARCH,
    "make_mma_swizzle_layout": _GPU_ARCH, "get_swizzle_layout": _GPU_ARCH, "set_max_nreg": _GPU_ARCH,
    "inc_max_nreg": _GPU_ARCH, "dec_max_nreg": _GPU_ARCH, "deallocate_tmem": _GPU_ARCH, "ws": _GPU_ARCH,
    "ws_op": _GPU_ARCH, "warp_specialize": _GPU_ARCH, "wait_wgmma": _GPU_ARCH, "validate_gemm_ab_dtypes": _GPU_ARCH,
    "BaseTileScheduler": _INTERNAL, "JITFunc": _INTERNAL, "KernelLaunchFrame": _INTERNAL, "ProducerLoad": _INTERNAL,
    "eager": "upstream's own AST front end; here the eager style of @tilelang.jit is a source transformation "
             "(docs/jit.md)",
    "dyn": "upstream's early spelling of a dynamic size (T.dyn['K'], removed upstream after 0.1.7); write "
           "T.dynamic('K')",
}

#: Reasons by prefix (names of upstream's namespace that start with one of these).
_BY_PREFIX = (
    (("tma_", "wgmma_", "tcgen05_", "ptx_", "mbarrier_", "cluster_", "get_cluster_", "clc_", "warpgroup_",
      "alloc_tmem", "alloc_barrier", "alloc_cluster_barrier", "alloc_descriptor", "alloc_wgmma_desc", "alloc_tcgen05_",
      "initialize_wgmma_", "initialize_tcgen05_", "annotate_ws_", "WS", "WGMMA", "TCGEN05", "TensorCoreIntrinEmitter",
      "ldg", "stg", "lds", "sts"), _GPU_ARCH),
)


def why_not_provided(name: str) -> Optional[str]:
    """The reason upstream TileLang's ``T.<name>`` is not provided here and what to do instead, or
    ``None`` for a name this module knows nothing about."""
    reason = _BY_NAME.get(name)
    if reason is not None:
        return reason
    for prefixes, why in _BY_PREFIX:
        if name.startswith(prefixes):
            return why
    return None
