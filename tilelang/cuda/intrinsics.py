"""``tilelang.cuda.intrinsics``: TileLang's CUDA tensor-core helpers; here only the layout hints.

``make_mma_swizzle_layout(buffer)`` is TileLang's swizzled shared-memory layout for MMA
operands. Like every :mod:`tilelang.layout` constructor it builds a hint for
``T.annotate_layout``, which has no effect here (layouts are this pipeline's choice; results do
not depend on them). TileLang's intrinsic emitters (``TensorCoreIntrinEmitter`` & co.) are not
provided (docs/compatibility.md).
"""

from tilelang_core.language.layout_hints import _constructor

__all__ = ["make_mma_swizzle_layout"]

make_mma_swizzle_layout = _constructor("make_mma_swizzle_layout")
