"""``tilelang.ir``: source spans on a kernel's IR (which user line each statement and buffer comes from).

The helpers of :mod:`tilelang_core.language.spans`: ``make_span``, ``span_to_location``,
``get_stmt_span``/``set_stmt_span``, ``get_buffer_span``/``set_buffer_span``, ``span_coverage``.
``TILELANG_ENABLE_IR_SPAN=0`` parses kernels without spans. Importing this module imports no
TVM; the helpers do on first use.
"""

from __future__ import annotations

from typing import Any

_NAMES = (
    "get_buffer_span",
    "get_stmt_span",
    "make_span",
    "set_buffer_span",
    "set_stmt_span",
    "span_coverage",
    "span_to_location",
)

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'tilelang.ir' has no attribute {name!r}")
    from tilelang_core.language import spans

    value = getattr(spans, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
