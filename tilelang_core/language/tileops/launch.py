"""Launch sizes of the enclosing ``T.Kernel``: ``T.get_thread_extent(s)``, ``T.get_block_extent(s)``.

They are the sizes written in ``with T.Kernel(gx, gy, gz, threads=(tx, ty, tz))``, read while the
kernel is defined (no IR of their own): an ``int`` for a static size, the grid's expression for a
dynamic one (``T.ceildiv(n, 64)``), 1 for an axis the kernel does not give. So they mean the same
on every target (on CPU targets a block is one iteration of the block loop, and ``threads`` is the
size a GPU launch would have).
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from ..core import current_kernel
from ._common import OperandTypeError, fail

__all__ = ["get_thread_extent", "get_thread_extents", "get_block_extent", "get_block_extents"]


def _kernel(op: str, args: tuple) -> Any:
    kernel = current_kernel()
    if kernel is None:
        fail(op, args, "must be used inside the body of a 'with T.Kernel(...)' statement (it reads that "
             "kernel's launch sizes)")
    return kernel


def _dim(op: str, dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, Integral):
        fail(op, (dim,), f"dim must be the int 0, 1 or 2 (x, y, z), got {type(dim).__name__} {dim!r}", OperandTypeError)
    if not 0 <= dim <= 2:
        fail(op, (dim,), f"dim must be 0, 1 or 2 (x, y, z), got {dim}")
    return int(dim)


def get_thread_extent(dim: int = 0) -> int:
    """Threads per block of the enclosing ``T.Kernel`` along ``dim`` (0 = x, 1 = y, 2 = z).

    1 for an axis ``threads=`` does not give; ``threads=None`` is 128 along x.

    :raises LoweringError: outside a ``T.Kernel`` body, or ``dim`` not 0, 1 or 2.
    """
    op = "T.get_thread_extent"
    d = _dim(op, dim)
    return int(_kernel(op, (dim,)).threads[d])


def get_thread_extents() -> list:
    """``[tx, ty, tz]``: :func:`get_thread_extent` of the three axes."""
    _kernel("T.get_thread_extents", ())
    return [get_thread_extent(d) for d in range(3)]


def get_block_extent(dim: int = 0) -> Any:
    """Blocks of the enclosing ``T.Kernel``'s grid along ``dim`` (0 = x, 1 = y, 2 = z).

    An ``int`` for a static extent, the extent's expression for a dynamic one, 1 for an axis the
    kernel does not give.

    :raises LoweringError: outside a ``T.Kernel`` body, or ``dim`` not 0, 1 or 2.
    """
    op = "T.get_block_extent"
    d = _dim(op, dim)
    grid = _kernel(op, (dim,)).grid
    if d >= len(grid):
        return 1
    extent = grid[d]
    return int(extent) if isinstance(extent, Integral) else extent


def get_block_extents() -> list:
    """``[gx, gy, gz]``: :func:`get_block_extent` of the three axes."""
    _kernel("T.get_block_extents", ())
    return [get_block_extent(d) for d in range(3)]
