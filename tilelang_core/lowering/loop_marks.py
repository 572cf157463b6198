"""Loop marks: annotations a tile operator puts on a loop for one later lowering step.

``T.reduce_*`` marks its reduction loop for the packed CUDA reductions (``tl.packed_reduce``) and
the CPU partial reductions (``tl.lane_reduce``), ``T.gemm`` its K loop for the CPU row groups
(``tl.cpu_gemm_tiles``). The step that reads a mark rewrites the loop or drops the mark; these
functions are the reading, the dropping and the walk over the marked loops that they share.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm_ffi
from tvm import tirx

__all__ = ["map_marked", "mark_of", "without_mark"]


def mark_of(loop: Any, key: str) -> Optional[str]:
    """The value of mark ``key`` on ``loop`` (a ``For``) as a string, else None."""
    if not isinstance(loop, tirx.For) or loop.annotations is None:
        return None
    value = loop.annotations.get(key)
    return None if value is None else str(value)


def without_mark(loop: Any, key: str, body: Any = None) -> Any:
    """``loop`` without mark ``key`` (with ``body`` instead of its own where given)."""
    notes = {k: v for k, v in loop.annotations.items() if k != key}
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body if body is None else body,
                    loop.thread_binding, notes)


def map_marked(node: Any, key: str, rewrite: Optional[Callable[[Any], Any]] = None) -> Any:
    """``node`` (a statement) with every loop marked ``key`` replaced by ``rewrite(loop)``; without
    ``rewrite``, by the loop without the mark."""
    rewrite = rewrite or (lambda loop: without_mark(loop, key))
    return tvm_ffi.structural_map(node, [(tirx.For, lambda f: rewrite(f) if mark_of(f, key) is not None else f)])
