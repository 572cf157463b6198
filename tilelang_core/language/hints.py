"""Layout and scheduling hints of TileLang, accepted without effect: ``T.annotate_layout``, ``T.use_swizzle``.

In TileLang these steer how its compiler lays tiles out in memory and orders blocks; they do not
change what a kernel computes. This pipeline chooses layouts and block order itself, so the hints
are checked for their form and otherwise ignored (docs/compatibility.md). The layout objects they
take come from :mod:`tilelang.layout`.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["annotate_layout", "use_swizzle"]


def annotate_layout(layout_map: Mapping[Any, Any], allow_reannotation: bool = False, allow_buffer_region: bool = False) -> None:
    """``T.annotate_layout({buffer: layout, ...})``: a layout hint per buffer; no effect here.

    :raises TypeError: ``layout_map`` is not a dict whose keys are buffers.
    """
    from tvm import tirx

    if not isinstance(layout_map, Mapping):
        raise TypeError(f"T.annotate_layout expects a dict {{buffer: layout}}, got {type(layout_map).__name__}")
    for key in layout_map:
        if not isinstance(key, tirx.Buffer):
            raise TypeError(f"T.annotate_layout: keys must be buffers (T.alloc_shared, T.alloc_fragment, ...), got {key!r}")
    return None


def use_swizzle(panel_size: int = 8, order: str = "row", enable: bool = True, device_func: Any = None) -> None:
    """``T.use_swizzle(panel_size, order="row")``: a block-rasterization hint; no effect here.

    :raises ValueError: ``order`` is not ``"row"`` or ``"col"``, or ``panel_size`` is not positive.
    """
    if order not in ("row", "col"):
        raise ValueError(f"T.use_swizzle: order must be 'row' or 'col', got {order!r}")
    if not isinstance(panel_size, int) or panel_size < 1:
        raise ValueError(f"T.use_swizzle: panel_size must be a positive int, got {panel_size!r}")
    return None
