"""``T.index_to_coordinates(index, shape)``: the row-major coordinates of a flat index."""

from __future__ import annotations

from typing import Any, Sequence

from ._common import OperandTypeError, fail

__all__ = ["index_to_coordinates"]


def index_to_coordinates(index: Any, shape: Sequence[Any]) -> list:
    """The coordinates ``[c0, ..., c(n-1)]`` of flat ``index`` in a row-major array of ``shape``.

    ``c(n-1) = index % shape[-1]``, then ``index // shape[-1]`` gives the others the same way, so
    ``sum(c[k] * prod(shape[k+1:]))`` is ``index`` for ``0 <= index < prod(shape)``. ``index`` and
    the extents are ints or integer expressions (then the coordinates are expressions, TIR's floor
    division and modulo); a plain helper, usable inside kernels and out.

    :raises LoweringError: (a ``TypeError``) ``shape`` is not a non-empty list or tuple.
    """
    if not isinstance(shape, (list, tuple)) or not shape:
        fail("T.index_to_coordinates", (index, shape), f"shape must be a non-empty list or tuple of extents, got {shape!r}",
             OperandTypeError)
    index = getattr(index, "scalar", index)  # TVMScript's scalar wrapper (T.alloc_var)
    coordinates = []
    for extent in reversed(shape):
        coordinates.append(index % extent)
        index = index // extent
    return coordinates[::-1]
