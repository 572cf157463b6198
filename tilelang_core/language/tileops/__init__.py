"""Tile operators of the kernel language (TileLang style), used as ``T.copy``, ``T.gemm``, ...

Each operator expands when the kernel is defined into ``T.Parallel`` nests and serial loops
over the operands' tiles, with bounds guards from the buffers' shapes, so CPU targets lower them
with the ordinary pipeline. On GPU targets :mod:`tilelang_core.lowering.fragments` gives
``T.alloc_fragment`` tiles their layout over the block's threads and turns ``T.atomic_add``
updates into hardware atomics. See docs/tile-operators.md.
"""

from __future__ import annotations

from ..core import alloc_fragment
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
