"""The order in which a GPU ``T.Parallel`` nest's iterations are numbered when spread over threads.

The frontend (lowering/frontend.py) runs flat iteration ``f`` of a spread nest in thread
``f % threads``, and lowering/parallel_locals.py proves which flat iteration wrote each element of
a local tile: both read the loop variables' values at ``f`` from :func:`loop_values`, so the two
cannot disagree on the order (row-major: the last loop varies fastest).
"""

from __future__ import annotations

from typing import Any, Optional

from tvm import tirx

from ..language.tileops._common import static_int

__all__ = ["loop_values", "static_count"]


def loop_values(loops: list, flat: Any) -> list:
    """``[(loop var, its value)]`` at flat iteration ``flat`` of the nest ``loops`` (outermost
    first): ``flat // (product of the inner extents) % extent + min``, row-major."""
    extents = [loop.extent for loop in loops]
    mapping = []
    for k, loop in enumerate(loops):
        inner_size: Any = 1
        for e in extents[k + 1:]:
            inner_size = e if (isinstance(inner_size, int) and inner_size == 1) else inner_size * e
        value: Any = flat
        if not (isinstance(inner_size, int) and inner_size == 1):
            value = tirx.floordiv(value, inner_size)
        if k > 0:
            value = tirx.floormod(value, loop.extent)
        if static_int(loop.min) != 0:
            value = value + loop.min
        mapping.append((loop.loop_var, value))
    return mapping


def static_count(loops: list) -> Optional[int]:
    """The number of iterations of the nest ``loops`` when every extent is a constant, else None."""
    total = 1
    for loop in loops:
        extent = static_int(loop.extent)
        if extent is None:
            return None
        total *= extent
    return total
