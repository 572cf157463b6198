"""``tilelang.language.common``: the kernel language without any vendor's own intrinsics.

The ``common`` dialect of :mod:`tilelang_core.language.dialects`: every name of
``tilelang.language`` (the same objects) except the TVMScript intrinsics only one vendor's
targets lower (``T.cuda``, ``T.ptx``, ``T.metal``, ...).
"""

from .dialects import populate as _populate

_populate(globals(), "common")
