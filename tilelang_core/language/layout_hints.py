"""TileLang's layout constructors as hints that have no effect here (``tilelang.layout``,
``T.Layout``, ``T.Fragment``).

TileLang code builds layouts (``make_swizzled_layout(buf)``, ``T.Layout(shape, fn)``,
``T.Fragment(shape, forward_fn=...)``) only to pass them to ``T.annotate_layout``, which this
pipeline accepts and ignores (it chooses layouts itself; results do not depend on it). So every
name here builds a :class:`LayoutHint` that records what was asked; using one for anything else
(computing indices, ``.repeat(...)``, printing its map) raises an error that says layouts are not
provided. :mod:`tilelang.layout` re-exports this module. See docs/compatibility.md.
"""

from __future__ import annotations

from typing import Any

from ..errors import KernelDefinitionError

__all__ = ["LayoutHint", "LayoutAttributeError"]


class LayoutAttributeError(KernelDefinitionError, AttributeError):
    """An attribute of a layout hint: this package's refusal, and an ``AttributeError`` so that
    ``hasattr(hint, name)`` is False (binding a hint to a name in a kernel body, ``lay =
    T.Fragment(...)``, asks ``hasattr(value, "dtype")``; it stopped with this refusal)."""


class LayoutHint:
    """What a TileLang layout constructor was called with; only ``T.annotate_layout`` takes it."""

    __slots__ = ("kind", "args", "kwargs")

    def __init__(self, kind: str, args: tuple = (), kwargs: Any = None) -> None:
        self.kind = kind
        self.args = args
        self.kwargs = dict(kwargs or {})

    def __getattr__(self, name: str) -> Any:
        raise LayoutAttributeError(
            f"tilelang.layout.{self.kind}(...).{name}: layouts are not provided by TileLang-Core; a layout can only be "
            "passed to T.annotate_layout, which has no effect here (docs/compatibility.md)"
        )

    def __repr__(self) -> str:
        return f"<tilelang.layout hint {self.kind}>"


def _constructor(kind: str) -> Any:
    def build(*args: Any, **kwargs: Any) -> LayoutHint:
        return LayoutHint(kind, args, kwargs)

    build.__name__ = build.__qualname__ = kind
    build.__doc__ = f"TileLang's ``{kind}``: a :class:`LayoutHint` for ``T.annotate_layout`` (no effect here)."
    return build


_NAMES = (
    "Layout",
    "Fragment",
    "PartialFragment",
    "make_swizzled_layout",
    "make_wgmma_swizzled_layout",
    "make_tcgen05mma_swizzled_layout",
    "make_full_bank_swizzled_layout",
    "make_half_bank_swizzled_layout",
    "make_quarter_bank_swizzled_layout",
    "make_volta_swizzled_layout",
    "make_linear_layout",
    "make_gemm_fragment_8x8",
    "make_gemm_fragment_8x8_transposed",
    "make_fully_replicated_layout_fragment",
    "make_fully_replicated_partial_fragment",
    "make_cutlass_metadata_layout",
    "make_strided_slice",
)
for _name in _NAMES:
    globals()[_name] = _constructor(_name)
__all__ += list(_NAMES)
del _name
