"""``tilelang.metal.language``: the kernel language as metal targets see it (the ``metal`` dialect).

The same objects as ``tilelang.language``; only the exported names differ
(tilelang_core/language/dialects.py).
"""

from tilelang_core.language.dialects import populate as _populate

_populate(globals(), "metal")
