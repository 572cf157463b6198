"""``tilelang.transform``: ``PassConfigKey``, the names of the ``pass_configs`` keys.

``tilelang.transform.PassConfigKey.TL_DISABLE_VECTORIZE`` is the string
``"tl.disable_vectorize"``; see docs/pipeline.md for what each key does on each target. TileLang's
pass objects (``tilelang.transform.Simplify``, ``LayoutInference``, ...) are internals of its
compiler and are not provided (docs/compatibility.md), except three standalone TIR rewrites
(``LegalizeNegativeIndex``, ``IfStmtBinding``, ``MergeIfStmt``; see
``tilelang_core.lowering.tir_rewrites``) and ``LowerAccessPtr`` (``tl.access_ptr`` -> ``tvm_access_ptr``,
``tilelang_core.lowering.access_ptr``, which the pipeline also runs). ``PassContext`` is TVM's.
"""

from __future__ import annotations

from typing import Any

from tilelang_core.lowering.configs import PassConfigKey  # noqa: F401

__all__ = ["IfStmtBinding", "LegalizeNegativeIndex", "LowerAccessPtr", "MergeIfStmt", "PassConfigKey", "PassContext",
           "apply_simplify", "simplify_prim_func"]


def simplify_prim_func(func: Any) -> Any:
    """TileLang's decorator of a function returning a ``T.prim_func``, to simplify what it returns.

    Provided with no effect: the function is returned as it is, and its kernels are simplified when
    they are lowered, where this pipeline runs TVM's simplifier after its own checks and guards
    (a simplification before them could fold what they look at). Kernels written with it compile
    unchanged (upstream's bitnet examples decorate their kernel factories with it).
    """
    return func


def apply_simplify(stmt: Any, inline_let: bool = False) -> Any:
    """TileLang's simplification of a ``PrimFunc`` or ``IRModule``: returned as it is here, for the
    reason :func:`simplify_prim_func` gives (``tilelang.lower`` shows the simplified kernel)."""
    del inline_let
    return stmt


_REWRITES = ("IfStmtBinding", "LegalizeNegativeIndex", "MergeIfStmt")


def __getattr__(name: str) -> Any:
    if name == "PassContext":
        import tvm  # tvm.transform is an attribute of tvm (tvm.ir.transform), not an importable module

        return tvm.ir.transform.PassContext
    if name in _REWRITES:
        from tilelang_core.lowering import tir_rewrites

        return getattr(tir_rewrites, name)
    if name == "LowerAccessPtr":
        from tilelang_core.lowering.access_ptr import LowerAccessPtr

        return LowerAccessPtr
    raise AttributeError(
        f"module 'tilelang.transform' has no attribute {name!r}: TileLang's passes are not provided "
        "(docs/compatibility.md); only PassConfigKey, PassContext, LegalizeNegativeIndex, IfStmtBinding, MergeIfStmt, "
        "LowerAccessPtr, simplify_prim_func and apply_simplify (both without effect) are"
    )
