"""The kernel language, used as ``import tilelang.language as T``.

Everything of TVMScript's ``tirx`` dialect (``T.prim_func``, ``T.Buffer``, dtypes, math
intrinsics, ``T.launch_thread``, ``T.thread_binding``, ``T.alloc_shared``, ``T.serial``,
``T.grid``, ``T.macro``, ...) plus the TileLang-style constructs of
:mod:`tilelang_core.language.core`: ``T.Tensor``, ``T.dynamic``/``T.symbolic``,
``T.ceildiv``, ``T.Kernel``, ``T.Parallel``, ``T.alloc_fragment``. See docs/language.md.
"""

from ..dependencies import require as _require

_require("tvm", needed_by="tilelang.language")  # a clear MissingDependencyError without TVM

from tvm.script.tirx import *  # noqa: F401,F403,E402 - the whole TVMScript tirx surface

from .core import (  # noqa: F401 - public API
    Kernel,
    Parallel,
    Tensor,
    alloc_fragment,
    ceildiv,
    dtype_name,
    dynamic,
    prim_func,
    symbolic,
)

# Tile operators (docs/tile-operators.md).
from .tileops import (  # noqa: F401,E402 - public API
    Pipelined,
    atomic_add,
    clear,
    copy,
    fill,
    gemm,
    reduce_absmax,
    reduce_abssum,
    reduce_max,
    reduce_min,
    reduce_sum,
)
