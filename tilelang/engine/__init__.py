"""``tilelang.engine``: where TileLang code finds ``lower`` (``from tilelang.engine import lower``).

``tilelang.engine.lower`` is the same function as ``tilelang.lower``; the submodule
``tilelang.engine.lower`` exists too, for ``from tilelang.engine.lower import lower``.
"""

from . import lower as _lower_module
from .lower import lower  # noqa: F401 - the function shadows the submodule name, as in TileLang

del _lower_module
__all__ = ["lower"]
