"""``tilelang.rocm.language``: the kernel language as rocm targets see it (the ``rocm`` dialect).

The same objects as ``tilelang.language``; only the exported names differ
(tilelang_core/language/dialects.py).
"""

from tilelang_core.language.dialects import populate as _populate

_populate(globals(), "rocm")
