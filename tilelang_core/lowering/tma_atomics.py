"""The markers of ``T.atomic_add(..., use_tma=True)`` (:mod:`tilelang_core.language.tileops.tma_atomic`)
per target.

**CUDA sm_90 and later** (from ``lower_gpu_intrinsics``): calls of helpers in the kernel's
prelude (:func:`cuda_helper`):

- ``tl_tma_store_fence()``: ``fence.proxy.async``, the thread's earlier accesses (its writes to
  the shared tile, and its ordinary accesses to the destination) are ordered before the bulk-copy
  unit's (every thread, before the block barrier);
- ``tl_tma_store_ready_<t>(dst, src, n)``: whether a row can go through the bulk unit (both
  addresses 16-byte aligned, ``n`` elements a positive multiple of 16 bytes);
- ``tl_tma_store_add_<t>(dst, src, n)``: ``cp.reduce.async.bulk.global.shared::cta.bulk_group.add``
  of ``n`` elements, then ``cp.async.bulk.commit_group``;
- ``tl_tma_store_wait()``: ``cp.async.bulk.wait_group 0`` (the reductions have completed) and
  ``fence.proxy.async.global`` (their writes are visible to the block's ordinary loads).

**CUDA before sm_90, other GPU kinds, CPU targets**: a :class:`TmaAtomicError` naming the
kernel line (the bulk reduction does not exist there; an ordinary ``T.atomic_add`` does),
raised by :func:`check_target`, which ``lower`` runs on every kernel before anything else lowers
it: the one place these markers are refused. The element-by-element form of a ``use_tma=True``
tile (``add_tma`` atomic markers, lowering/atomics.py) is refused the same way, so whether a
kernel lowers does not depend on its tiles' shapes.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
from tvm import tirx

from ..language.tileops.tma_atomic import ADD, FENCE, MARKERS, READY, WAIT, TMA_ADD_DTYPES, TmaAtomicError
from .atomics import _SUFFIX

#: PTX type of the bulk reduction per dtype (16-bit floats need ``.noftz``).
_PTX_TYPE = {
    "float16": "noftz.f16",
    "bfloat16": "noftz.bf16",
    "float32": "f32",
    "int32": "s32",
    "uint32": "u32",
    "uint64": "u64",
}
_FIRST_ARCH = 90


def arch_number(target: Any) -> Optional[int]:
    """The architecture number of a CUDA target (90 for ``sm_90``/``sm_90a``), None when unknown."""
    import re

    from .target import arch_of

    found = re.match(r"sm_(\d+)", arch_of(target) or "")
    return int(found.group(1)) if found else None


def refuse_target(loc: str, kind: str, arch: Optional[int]) -> None:
    """Raise :class:`TmaAtomicError` unless the target is CUDA sm_90 or later (an unknown CUDA
    architecture is let through: the CUDA compiler then decides)."""
    if kind != "cuda":
        raise TmaAtomicError(
            f"{loc}: T.atomic_add(..., use_tma=True) needs a GPU target with TMA (CUDA sm_90 or later); the "
            f"{kind} target has none (drop use_tma=True for one atomic per element)"
        )
    if arch is not None and arch < _FIRST_ARCH:
        raise TmaAtomicError(
            f"{loc}: T.atomic_add(..., use_tma=True): TMA atomic add requires a CUDA target with TMA support "
            f"(SM90+); the target is sm_{arch} (drop use_tma=True for one atomic per element, or lower for sm_90 "
            'or later: target="cuda -arch=sm_90")'
        )


def check_target(node: Any, kind: str, arch: Optional[int]) -> None:
    """Refuse the first ``use_tma=True`` marker of ``node`` (a kernel before lowering) unless the
    target can run it (:func:`refuse_target`). Run before TVM's passes, which would report the
    error as a ``RuntimeError`` of their own (an exception crossing TVM's FFI keeps its class only
    when TVM does not know the class; :class:`TmaAtomicError` is also TVM's ``InternalError``).
    The lowering steps after it lower the markers and refuse nothing."""
    import tvm_ffi

    from . import atomics, intrinsics

    locations: list = []

    def on_call(call):
        m = intrinsics.parse(call)
        if m is not None and m.name in MARKERS:
            locations.append(m.loc)
        a = atomics.parse(call)
        if a is not None and a.op == "add_tma":
            locations.append(a.loc)
        return call

    tvm_ffi.structural_map(node, [(tvm.ir.Call, on_call)])  # raised here, not inside the walk's callback
    for loc in locations[:1]:
        refuse_target(loc, kind, arch)


def _helper(m: Any) -> str:
    if m.name in (FENCE, WAIT):
        return f"tl_{m.name}"
    return f"tl_{m.name}_{_SUFFIX[m.mode]}"


def lower_gpu_statement(m: Any, used: set) -> Optional[Any]:
    """The CUDA statement of a fence, add or wait marker statement ``m``, else None."""
    if m.name not in (FENCE, ADD, WAIT):
        return None
    used.add(_helper(m))
    return tirx.Evaluate(tirx.call_extern("int32", _helper(m), *m.args))


def lower_gpu_call(m: Any, used: set) -> Optional[Any]:
    """The CUDA expression of a ready marker ``m``, else None (other markers used as values: an error)."""
    if m.name not in MARKERS:
        return None
    if m.name != READY:
        raise TmaAtomicError(f"{m.loc}: internal error: the TMA marker {m.name} is used as a value")
    used.add(_helper(m))
    return tirx.call_extern("bool", _helper(m), *m.args)


def cuda_helper(name: str) -> Optional[str]:
    """CUDA text of helper ``name``, else None."""
    if name == f"tl_{FENCE}":
        return (
            f"__device__ __forceinline__ void {name}() {{\n"
            '  asm volatile("fence.proxy.async;" : : : "memory");\n'
            "}\n"
        )
    if name == f"tl_{WAIT}":
        return (
            f"__device__ __forceinline__ void {name}() {{\n"
            '  asm volatile("cp.async.bulk.wait_group 0;" : : : "memory");\n'
            '  asm volatile("fence.proxy.async.global;" : : : "memory");\n'
            "}\n"
        )
    for dtype in TMA_ADD_DTYPES:
        suffix, size = _SUFFIX[dtype], tvm.runtime.DataType(dtype).bits // 8
        if name == f"tl_{READY}_{suffix}":
            return (
                f"__device__ __forceinline__ bool {name}(const void* dst, const void* src, int n) {{\n"
                f"  unsigned long long bytes = (unsigned long long)n * {size}ull;\n"
                "  return n > 0 && (bytes & 15ull) == 0 && bytes < (1ull << 32) &&\n"
                "         ((reinterpret_cast<unsigned long long>(dst) | reinterpret_cast<unsigned long long>(src)) & 15ull) == 0;\n"
                "}\n"
            )
        if name == f"tl_{ADD}_{suffix}":
            return (
                f"__device__ __forceinline__ void {name}(void* dst, const void* src, int n) {{\n"
                "  unsigned int smem = static_cast<unsigned int>(__cvta_generic_to_shared(src));\n"
                f"  unsigned int bytes = static_cast<unsigned int>(n) * {size}u;\n"
                f'  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.{_PTX_TYPE[dtype]} [%0], [%1], %2;"\n'
                '               : : "l"(dst), "r"(smem), "r"(bytes) : "memory");\n'
                '  asm volatile("cp.async.bulk.commit_group;" : : : "memory");\n'
                "}\n"
            )
    return None
