"""``tilelang.layout``: TileLang's layout constructors, as hints for ``T.annotate_layout`` that have
no effect here (:mod:`tilelang_core.language.layout_hints`; docs/compatibility.md)."""

from tilelang_core.language.layout_hints import *  # noqa: F401,F403 - the public surface
from tilelang_core.language.layout_hints import LayoutHint, _constructor, __all__  # noqa: F401
