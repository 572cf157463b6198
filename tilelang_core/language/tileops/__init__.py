"""Tile operators and intrinsics of the kernel language (TileLang style): ``T.copy``, ``T.gemm``,
reductions, scans, atomics, layout-free data movement, math and warp intrinsics.

Tile operators expand when the kernel is defined into ``T.Parallel`` nests and serial loops
over the operands' tiles, with bounds guards from the buffers' shapes, so CPU targets lower them
with the ordinary pipeline. On GPU targets :mod:`tilelang_core.lowering.fragments` gives
``T.alloc_fragment`` tiles their layout over the block's threads; atomics become real atomics
on every target (:mod:`tilelang_core.lowering.atomics`). See docs/tile-operators.md.

``__all__`` lists every public name; ``tilelang_core.language`` re-exports them all.
"""

from __future__ import annotations

from ..core import alloc_fragment
from ._common import ATOMIC_ADD_KEY, FRAGMENT_SCOPE, PIPELINED_STAGES_KEY
from .atomic import (
    atomic_add,
    atomic_addx2,
    atomic_addx4,
    atomic_and,
    atomic_load,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_store,
    atomic_xor,
)
from .copy import async_copy, clear, copy, fill, ptx_commit_group, ptx_wait_group
from .im2col import c2d_im2col, im2col
from .debug import device_assert
from .debug_print import print  # noqa: A004 - TileLang's T.print
from .safe_value import annotate_safe_value
from .gemm import GemmWarpPolicy, gemm
from .intrinsics import (
    __cos,
    __exp,
    __exp10,
    __ffs,
    __fns,
    __ldg,
    __log,
    __log2,
    __log10,
    __sin,
    __tan,
    activemask,
    align_up,
    all_sync,
    any_sync,
    ballot,
    ballot_sync,
    abs,
    clamp,
    dp4a,
    fast_rcp,
    get_block_binding,
    get_block_bindings,
    get_thread_binding,
    get_thread_bindings,
    ieee_add,
    ieee_fdiv,
    ieee_fmaf,
    ieee_frcp,
    ieee_frsqrt,
    ieee_fsqrt,
    ieee_mul,
    ieee_sub,
    match_all_sync,
    match_any_sync,
    round,
    shfl_down,
    shfl_sync,
    shfl_up,
    shfl_xor,
    syncthreads_and,
    syncthreads_count,
    syncthreads_or,
)
from .layout import reshape, transpose, view
from .pdl import pdl_sync, pdl_trigger
from .pipeline import Pipelined
from .reduce import (
    reduce_absmax,
    reduce_abssum,
    reduce_bitand,
    reduce_bitor,
    reduce,
    reduce_bitxor,
    reduce_max,
    reduce_min,
    reduce_sum,
)
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .scan import cummax, cumsum
from .variables import alloc_global, alloc_var
from .warp import (
    get_lane_idx,
    get_warp_group_idx,
    get_warp_idx,
    get_warp_idx_sync,
    shuffle_elect,
    sync_grid,
    sync_threads,
    sync_warp,
    warp_reduce_bitand,
    warp_reduce_bitor,
    warp_reduce_max,
    warp_reduce_min,
    warp_reduce_sum,
)
from .vector import (
    abs2,
    add2,
    extract_lane,
    fma2,
    max2,
    min2,
    mul2,
    sub2,
)
from .logical import all_of, any_of
from .loops import Serial, Unroll, Vectorized, loop_break, serial, unroll
from .launch import get_block_extent, get_block_extents, get_thread_extent, get_thread_extents
from .indexing import index_to_coordinates
from .pointers import access_ptr
from .extern_source import import_source

__all__ = [
    "annotate_safe_value",
    "c2d_im2col",
    "im2col",
    "device_assert",
    "__cos",
    "__exp",
    "__exp10",
    "__ffs",
    "__fns",
    "__ldg",
    "__log",
    "__log2",
    "__log10",
    "__sin",
    "__tan",
    "abs2",
    "activemask",
    "add2",
    "align_up",
    "all_sync",
    "alloc_fragment",
    "alloc_global",
    "alloc_reducer",
    "alloc_var",
    "any_sync",
    "ballot",
    "ballot_sync",
    "abs",
    "clamp",
    "round",
    "cummax",
    "cumsum",
    "dp4a",
    "extract_lane",
    "fast_rcp",
    "finalize_reducer",
    "fma2",
    "get_block_binding",
    "get_block_bindings",
    "get_thread_binding",
    "get_thread_bindings",
    "ieee_add",
    "ieee_fdiv",
    "ieee_fmaf",
    "ieee_frcp",
    "ieee_frsqrt",
    "ieee_fsqrt",
    "ieee_mul",
    "ieee_sub",
    "match_all_sync",
    "match_any_sync",
    "max2",
    "min2",
    "mul2",
    "reducer_init",
    "reducer_update",
    "reshape",
    "shfl_down",
    "shfl_sync",
    "shfl_up",
    "shfl_xor",
    "sub2",
    "syncthreads_and",
    "syncthreads_count",
    "syncthreads_or",
    "transpose",
    "view",
    "atomic_add",
    "atomic_addx2",
    "atomic_addx4",
    "atomic_and",
    "atomic_load",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_store",
    "atomic_xor",
    "clear",
    "copy",
    "async_copy",
    "ptx_commit_group",
    "ptx_wait_group",
    "fill",
    "gemm",
    "GemmWarpPolicy",
    "Pipelined",
    "reduce_absmax",
    "reduce_abssum",
    "reduce_bitand",
    "reduce_bitor",
    "reduce",
    "reduce_bitxor",
    "reduce_max",
    "reduce_min",
    "reduce_sum",
    "get_lane_idx",
    "get_warp_group_idx",
    "get_warp_idx",
    "get_warp_idx_sync",
    "shuffle_elect",
    "sync_grid",
    "sync_threads",
    "sync_warp",
    "warp_reduce_bitand",
    "warp_reduce_bitor",
    "warp_reduce_max",
    "warp_reduce_min",
    "warp_reduce_sum",
    "print",
    # logical reductions, loop control, launch sizes, indexing (TileLang names)
    "all_of",
    "any_of",
    "loop_break",
    "Serial",
    "serial",
    "Unroll",
    "unroll",
    "Vectorized",
    "get_block_extent",
    "get_block_extents",
    "get_thread_extent",
    "get_thread_extents",
    "index_to_coordinates",
    # raw pointers into buffers (T.call_extern arguments)
    "access_ptr",
    "import_source",
    # programmatic dependent launch (sm_90+; nothing where launches are serialized)
    "pdl_sync",
    "pdl_trigger",
]

#: Marker keys (not kernel-language names; kept importable from here).
MARKER_KEYS = (ATOMIC_ADD_KEY, FRAGMENT_SCOPE, PIPELINED_STAGES_KEY)
