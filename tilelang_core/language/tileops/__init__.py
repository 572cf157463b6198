"""Tile operators of the kernel language (TileLang style), used as ``T.copy``, ``T.gemm``, ...

Each operator expands when the kernel is defined into ``T.Parallel`` nests and serial loops
over the operands' tiles, with bounds guards from the buffers' shapes, so CPU targets lower them
with the ordinary pipeline. On GPU targets :mod:`tilelang_core.lowering.fragments` gives
``T.alloc_fragment`` tiles their layout over the block's threads and turns ``T.atomic_add``
updates into hardware atomics. See docs/tile-operators.md.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

from tvm.tirx.script.builder import ir as _B

from ..core import dtype_name
from ._common import ATOMIC_ADD_KEY, FRAGMENT_SCOPE, PIPELINED_STAGES_KEY
from .atomic import atomic_add
from .copy import clear, copy, fill
from .gemm import gemm
from .pipeline import Pipelined
from .reduce import reduce_absmax, reduce_abssum, reduce_max, reduce_min, reduce_sum

__all__ = [
    "alloc_fragment",
    "atomic_add",
    "clear",
    "copy",
    "fill",
    "gemm",
    "Pipelined",
    "reduce_absmax",
    "reduce_abssum",
    "reduce_max",
    "reduce_min",
    "reduce_sum",
    "ATOMIC_ADD_KEY",
    "FRAGMENT_SCOPE",
    "PIPELINED_STAGES_KEY",
]


def alloc_fragment(shape: Union[Sequence[Any], Any], dtype: Any = "float32"):
    """A tile held in registers: ``C_local = T.alloc_fragment((128, 128), "float32")``.

    CPU targets: a stack array per block (like ``T.alloc_local``). GPU targets: the tile is spread
    over the block's threads (element with row-major index ``f`` lives in thread ``f % threads``,
    slot ``f // threads``); a fragment that some statement reads or writes from another thread
    than its owner is placed in shared memory instead (docs/tile-operators.md). Storage scope
    ``local.fragment``.
    """
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    return _B.alloc_buffer(tuple(shape), dtype_name(dtype), scope=FRAGMENT_SCOPE)
