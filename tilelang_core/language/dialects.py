"""Language dialects: the kernel language as seen from one family of targets.

``import tilelang.language as T`` is the whole language, every name a kernel can use on any
target (its dialect is ``"cuda"``, the widest, as in TileLang). A dialect module is the same
language with the names a family of targets cannot lower left out:

- ``common`` (``tilelang.language.common``, also ``tilelang.cpu.language`` and
  ``tilelang.webgpu.language``): without any vendor's own TVMScript intrinsics
  (:mod:`tilelang_core.language.tir.exports`) and without :data:`CUDA_FAMILY_NAMES`;
- ``cuda`` (``tilelang.cuda.language``): the whole language, the same objects as ``T``;
- ``metal`` / ``rocm`` (``tilelang.metal.language`` / ``tilelang.rocm.language``): common plus
  that vendor's own intrinsics.

Every name in a dialect is the very object ``T`` has; a dialect only chooses which names it
exports, so a kernel written against a dialect is a kernel of the whole language. Leaving a
name out makes ``T.ptx_legacy`` in a CPU-dialect kernel an ``AttributeError`` when the kernel is
written rather than a lowering error later.
"""

from __future__ import annotations

from typing import Any

from .tir import exports as _exports

__all__ = ["CUDA_FAMILY_NAMES", "DIALECTS", "dialect_names", "populate"]

#: Dialect name -> the vendor-only names it adds to the common surface (``None``: all of them).
DIALECTS: dict[str, Any] = {
    "common": frozenset(),
    "cpu": frozenset(),
    "webgpu": frozenset(),
    "cuda": None,
    "metal": _exports.METAL_ONLY_TIR_EXPORTS,  # target families of TileLang, not backend names
    "rocm": _exports.ROCM_ONLY_TIR_EXPORTS,
}


#: Names of this language (not TVMScript's) that belong to the CUDA family only, left out of every
#: other dialect as TileLang's dialects leave them out. ``T.pdl_trigger``/``T.pdl_sync`` lower to
#: nothing on CPU targets, so a ``T`` kernel using them still runs there; a kernel written against
#: the cpu dialect has no use for them.
CUDA_FAMILY_NAMES: frozenset[str] = frozenset({"pdl_trigger", "pdl_sync"})


def language_names() -> list[str]:
    """Every public name of the whole language (``T.__all__``)."""
    from .. import language

    return list(language.__all__)


def dialect_names(dialect: str) -> list[str]:
    """The names a dialect exports (its ``__all__``), in ``T.__all__``'s order.

    :raises ValueError: ``dialect`` is not one of :data:`DIALECTS`.
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown language dialect {dialect!r}; known: {', '.join(sorted(DIALECTS))}")
    extra = DIALECTS[dialect]
    names = language_names()
    if extra is None:
        return names
    vendor_only = _exports.BACKEND_ONLY_TIR_EXPORTS | CUDA_FAMILY_NAMES
    return [n for n in names if n not in vendor_only or n in extra]


def populate(namespace: dict[str, Any], dialect: str) -> None:
    """Fill a dialect module's globals: each name of :func:`dialect_names`, ``__all__``, ``__tilelang_dialect__``."""
    from .. import language

    names = dialect_names(dialect)
    namespace.update({n: getattr(language, n) for n in names})
    namespace["__all__"] = names
    namespace["__tilelang_dialect__"] = dialect
