"""The kernel language, used as ``import tilelang.language as T``.

Everything of TVMScript's ``tirx`` dialect (``T.prim_func``, ``T.Buffer``, dtypes, math
intrinsics, ``T.launch_thread``, ``T.thread_binding``, ``T.alloc_shared``, ``T.serial``,
``T.grid``, ``T.macro``, ...) plus the TileLang-style constructs of
:mod:`tilelang_core.language.core`: ``T.Tensor``, ``T.dynamic``/``T.symbolic``,
``T.ceildiv``, ``T.Kernel``, ``T.Parallel``, ``T.alloc_fragment``. See docs/language.md.
"""

from tvm.script.tirx import *  # noqa: F401,F403 - the whole TVMScript tirx surface

from .core import (  # noqa: F401 - public API
    Kernel,
    Parallel,
    StridedTensor,
    Tensor,
    alloc_fragment,
    ceildiv,
    const,
    dtype_name,
    dynamic,
    empty,
    macro,
    prim_func,
    symbolic,
)

# Tile operators and intrinsics (docs/tile-operators.md); their list is tileops.__all__.
from .tileops import *  # noqa: F401,F403,E402 - public API

# Dtypes as values (docs/language.md, "Dtypes"): T.float16 & co. replace TVMScript's dtype
# constructors with str-like dtype objects that also construct expressions; T.dtype(...) converts.
from . import dtypes  # noqa: E402
from .dtypes import dtype  # noqa: E402,F401 - public API

globals().update(dtypes.DTYPES)
