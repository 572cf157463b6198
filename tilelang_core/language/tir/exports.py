"""Which names of TVMScript's ``tirx`` dialect belong to one vendor's hardware.

TVM 0.27 exports its vendor-specific intrinsics from the vendor's own package
(``tvm.backend.cuda``: the ``T.cuda`` and ``T.ptx`` namespaces, ``T.ptx_legacy``, the shared- and
tensor-memory pools; ``tvm.backend.metal``: ``T.metal`` with the simdgroup matrix operations; ...).
The sets here are read from TVM itself, by the module each exported object comes from, so they
follow TVM rather than a list kept by hand. The language dialects
(:mod:`tilelang_core.language.common`, ``tilelang.cuda.language``, ``tilelang.cpu.language``, ...)
are built from them.
"""

from __future__ import annotations

import tvm.tirx.script.parser as _parser

__all__ = [
    "BACKEND_ONLY_TIR_EXPORTS",
    "CLASSIFIED_VENDOR_TIR_EXPORTS",
    "CUDA_ONLY_TIR_EXPORTS",
    "METAL_ONLY_TIR_EXPORTS",
    "ROCM_ONLY_TIR_EXPORTS",
    "SHARED_LEGACY_TIR_EXPORTS",
    "vendor_of",
]

_VENDOR_PACKAGE = "tvm.backend."


def vendor_of(value: object) -> str | None:
    """The vendor package (``cuda``, ``metal``, ``rocm``, ...) a TVMScript export comes from, or None."""
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        module = type(value).__module__
    if module.startswith(_VENDOR_PACKAGE):
        return module[len(_VENDOR_PACKAGE) :].split(".", 1)[0]
    return None


def _by_vendor() -> dict[str, frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for name in _parser.__all__:
        vendor = vendor_of(getattr(_parser, name, None))
        if vendor is not None:
            groups.setdefault(vendor, set()).add(name)
    return {vendor: frozenset(names) for vendor, names in groups.items()}


_VENDORS = _by_vendor()

#: TVMScript exports that only CUDA targets can lower (``T.cuda``, ``T.ptx``, ``T.ptx_legacy``, ...).
CUDA_ONLY_TIR_EXPORTS: frozenset[str] = _VENDORS.get("cuda", frozenset())
#: TVMScript exports that only Metal targets can lower (``T.metal``: simdgroup matrices, SIMD shuffles).
METAL_ONLY_TIR_EXPORTS: frozenset[str] = _VENDORS.get("metal", frozenset())  # TVM vendor packages, not backend names
#: TVMScript exports that only ROCm targets can lower (TVM 0.27 has none in the dialect).
ROCM_ONLY_TIR_EXPORTS: frozenset[str] = _VENDORS.get("rocm", frozenset()) | _VENDORS.get("hip", frozenset())
#: Every vendor's own exports (the three above and any other vendor TVM has, such as Trainium's).
BACKEND_ONLY_TIR_EXPORTS: frozenset[str] = frozenset().union(*_VENDORS.values()) if _VENDORS else frozenset()
#: GPU intrinsics of TVM's portable dialect that more than one vendor lowers (warp shuffles and
#: votes, storage barriers); they stay in every dialect.
SHARED_LEGACY_TIR_EXPORTS: frozenset[str] = frozenset(
    n for n in _parser.__all__ if n.startswith(("tvm_warp_", "tvm_storage_sync", "tvm_thread_allreduce"))
)
#: Every export classified as vendor-specific or shared GPU-legacy.
CLASSIFIED_VENDOR_TIR_EXPORTS: frozenset[str] = BACKEND_ONLY_TIR_EXPORTS | SHARED_LEGACY_TIR_EXPORTS
