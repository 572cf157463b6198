"""``A[i][j]`` / ``A[0:2][1:3]``: a region indexed again is refused, saying to index once.

``A[i]`` of a 2-D tensor is a region (row ``i``, all columns), and TVM applied a second subscript
to the region's first axis again: ``T.copy(A[0:2][1:3], ...)`` copied rows 1-2 (torch's
``a[0:2][1:3]`` is row 1 alone), and ``A[i][1]`` read the region ``A[i + 1, 0:4]``, without a
word or with an error about a region the user never wrote. TileLang refuses such a subscript;
:func:`install` makes TVM's region refuse it with the form to write instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_MARK = "_tilelang_region_subscript"


def _refuse(self: Any, index: Any) -> Any:
    raise TypeError(
        f"{self} is a region of {self.source.name}, and a region cannot be indexed again ({self.source.name}[...][...]): "
        f"index the tensor once with all its indices, {self.source.name}[i, j] for an element or "
        f"{self.source.name}[0:2, 1:3] for a tile"
    )


def install() -> None:
    """Make ``TensorRegion.__getitem__`` refuse (idempotent)."""
    from tvm import ir

    if getattr(ir.TensorRegion.__dict__.get("__getitem__"), _MARK, False):
        return
    setattr(_refuse, _MARK, True)
    ir.TensorRegion.__getitem__ = _refuse
