"""``T.PersistentTileScheduler``: the tiles of a 2-D grid shared by a kernel's persistent workers.

Worker ``w`` of ``num_workers`` takes the linear tile numbers ``w, w + num_workers, ...`` of the
``num_m_tiles x num_n_tiles`` grid; :meth:`PersistentTileScheduler.coord` turns a number into
``(m, n)``. The order of the numbers:

* ``cluster_size`` first groups the M tiles by ``cluster_size``: the scheduler works on the grid
  of ``ceildiv(num_m_tiles, cluster_size)`` cluster rows (the caller adds its rank in the
  cluster: ``bx = sched.m_idx * cluster_size + rank``);
* ``column_major`` names the fast axis: M (True) or N (False); the other is the slow axis;
* ``swizzle_size`` cuts the slow axis into panels of that many tiles (the last one may be
  narrower). Panels follow each other; inside a panel the tiles go along the fast axis, the
  panel's slow-axis tiles next to each other (CUTLASS's threadblock swizzle). With 1 the order is
  plain column-major (or row-major).

Stateful use (the default) keeps the current tile in four ``T.alloc_var`` scalars::

    sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=8)
    sched.init(worker)
    while sched.valid():
        bx, by = sched.m_idx, sched.n_idx
        ...
        sched.next_tile()

``stateful=False`` allocates nothing and only decodes (``bx, by = sched.coord(tile)``).

``num_workers`` (and a ``next_tile(step)``) is the stride of the walk, so it must be at least 1:
with 0 the walk never leaves its first tile, and a negative one goes down forever (such a call
never returned). A constant below 1 is refused where the scheduler is made; a run-time one makes
:meth:`~PersistentTileScheduler.valid` false (the walk ends, so no target loops forever) and the
call fails with ``T.device_assert``'s error ``... num_workers = workers must be at least 1, got 0``
(CPU targets: ``RuntimeError``; CUDA: a trap). Like every ``T.device_assert``, that check makes
the kernel's blocks serial with ``tvm_ffi`` on ``llvm`` (docs/tile-operators.md); a constant
``num_workers`` adds no check and keeps them parallel.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from .tileops._common import OperandTypeError, location

_OP = "T.PersistentTileScheduler"


def _refuse(message: str) -> None:
    """A TypeError-compatible LoweringError naming the operator and the kernel line."""
    raise OperandTypeError(f"{location()}: {_OP}: {message}")


#: The state scalars of a stateful scheduler.
_STATE = ("m_idx", "n_idx", "linear_idx", "current_iter")


def _expr(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (Integral, tvm.ir.Expr)):
        _refuse(f"expected an int or an integer expression, got {value!r}")
    return tirx.IntImm("int32", int(value)) if isinstance(value, Integral) else getattr(value, "scalar", value)


def _constant(expr: Any) -> Optional[int]:
    """The value of a constant integer expression, else None."""
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


#: What to pass instead of a stride below 1, by the stride's name.
_STRIDE_FIX = {
    "num_workers": "pass the number of workers (the blocks of the T.Kernel that share the tiles)",
    "next_tile's step": "pass a step of at least 1, or no step (num_workers)",
}


def _stride(what: str, value: Any) -> Any:
    """``value`` (``num_workers`` or a ``next_tile`` step, named ``what``) as an expression; a
    constant below 1 is refused here (the walk would never end)."""
    expr = _expr(value)
    constant = _constant(expr)
    if constant is not None and constant < 1:
        _refuse(f"{what} must be at least 1, got {constant} (a worker's walk over the tiles steps by it: "
                f"it would never end); {_STRIDE_FIX[what]}")
    return expr


def assert_stride(op: str, what: str, expr: Any, fix: str) -> None:
    """``T.device_assert``s that ``expr``, the run-time stride ``what`` of ``op``'s walk over the
    tiles, is at least 1 (nothing for a constant: the caller refuses one below 1 at once). The
    kernel call fails naming ``op``, ``what``, the expression, whether it was 0 or negative, and
    ``fix`` (what to pass instead)."""
    if _constant(expr) is not None:
        return
    from .tileops.debug import device_assert

    zero = tirx.const(0, str(expr.ty.dtype))
    text = f"{op}: {what} = {expr} must be at least 1, got"
    why = f"(worker w takes the tiles w, w + {what}, w + 2 * {what}, ...)"
    device_assert(tirx.NE(expr, zero), f"{text} 0 {why}; {fix}")
    device_assert(tirx.GT(expr, zero), f"{text} a negative value {why}; {fix}")


def _check_stride(what: str, expr: Any) -> None:
    """:func:`assert_stride` for the scheduler's ``num_workers`` or ``next_tile`` step."""
    assert_stride(_OP, what, expr, _STRIDE_FIX[what])


def _at_least_one(expr: Any) -> Any:
    """The condition that a stride is at least 1 (None for a constant one)."""
    return None if _constant(expr) is not None else tirx.GE(expr, tirx.const(1, str(expr.ty.dtype)))


def _ceildiv(a: Any, b: Any) -> Any:
    return tirx.floordiv(a + b - 1, b)


@_B.meta_class  # TVMScript binds instances to names and names their scalars after them
class PersistentTileScheduler:
    """Persistent, grid-strided tile scheduler with L2 swizzle and clustering (module docstring).

    :param num_m_tiles: tiles along M (``ceildiv(M, block_M)``); an int or an expression.
    :param num_n_tiles: tiles along N.
    :param num_workers: the persistent stride, the number of workers (blocks of the
        ``T.Kernel``, or clusters); required: this core has no device to ask for its SM count.
    :param swizzle_size: panel width along the slow axis (1: no swizzle).
    :param column_major: M is the fast axis (True) or N is (False).
    :param cluster_size: M tiles per cluster row (1: no clustering).
    :param stateful: allocate the ``m_idx``/``n_idx``/``linear_idx``/``current_iter`` scalars for
        ``init``/``valid``/``next_tile``; False: only :meth:`coord`.
    :param name: accepted for TileLang compatibility; the state scalars are named after the
        variable the scheduler is assigned to (``sched_m_idx``, ...).

    The state, when ``stateful``: ``m_idx`` (the current tile's M index, a cluster row when
    ``cluster_size > 1``), ``n_idx``, ``linear_idx`` (its linear number) and ``current_iter`` (how
    many tiles this worker has advanced past), each a scalar read in expressions.
    """

    def __init__(self, num_m_tiles: Any, num_n_tiles: Any, num_workers: Any = None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True,
                 name: Optional[str] = None) -> None:
        if num_workers is None:
            _refuse("num_workers is required here (the number of blocks of the T.Kernel that runs the "
                    "workers); TileLang's default, the GPU's SM count, is not known to a kernel compiled "
                    "without a device")
        for what, value in (("swizzle_size", swizzle_size), ("cluster_size", cluster_size)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                _refuse(f"{what} must be an int of at least 1, got {value!r}")
        self.num_workers = _stride("num_workers", num_workers)
        self.swizzle_size = int(swizzle_size)
        self.column_major = bool(column_major)
        self.cluster_size = int(cluster_size)
        m_tiles = _expr(num_m_tiles)
        if self.cluster_size > 1:
            m_tiles = _ceildiv(m_tiles, tirx.IntImm("int32", self.cluster_size))
        self.grid = (m_tiles, _expr(num_n_tiles))
        self.total_tiles = self.grid[0] * self.grid[1]
        self.stateful = bool(stateful)
        if self.stateful:
            # attribute names = the IR names' suffixes (TVMScript names them <variable>_<attribute>)
            self.m_idx = _B.alloc_scalar("int32", scope="local")
            self.n_idx = _B.alloc_scalar("int32", scope="local")
            self.linear_idx = _B.alloc_scalar("int32", scope="local")
            self.current_iter = _B.alloc_scalar("int32", scope="local")
            _check_stride("num_workers", self.num_workers)  # a run-time one below 1 fails the call

    # -- decoding ---------------------------------------------------------------------------------

    def coord(self, tile: Any) -> tuple[Any, Any]:
        """``(m, n)`` of linear tile number ``tile`` (an expression; no state is read or written).

        A ``tile`` past the last one gives a coordinate outside the grid (check ``tile <
        total_tiles`` before using it)."""
        tile = _expr(tile)
        fast_extent, slow_extent = self.grid if self.column_major else self.grid[::-1]
        if self.swizzle_size == 1:
            fast, slow = tirx.floormod(tile, fast_extent), tirx.floordiv(tile, fast_extent)
        else:
            width = tirx.IntImm("int32", self.swizzle_size)
            panel = tirx.floordiv(tile, width * fast_extent)
            first = panel * width
            local = tile - first * fast_extent
            # the last panel may be narrower; past the last tile (a wave loop's spare iterations)
            # the width stays 1, so the coordinate falls outside the grid instead of dividing by 0
            panel_width = tirx.max(tirx.min(width, slow_extent - first), tirx.IntImm("int32", 1))
            fast = tirx.floordiv(local, panel_width)
            slow = first + tirx.floormod(local, panel_width)
        return (fast, slow) if self.column_major else (slow, fast)

    # -- state ------------------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:  # only for names the instance does not have
        if name in _STATE:
            _refuse(f"a scheduler made with stateful=False has no {name}; use coord(tile)")
        raise AttributeError(f"'PersistentTileScheduler' object has no attribute {name!r}")

    def _store(self, field: str, value: Any) -> None:
        _B.buffer_store(getattr(self, field).source, value, [0])

    def _update(self) -> None:
        m, n = self.coord(self.linear_idx)
        self._store("m_idx", m)
        self._store("n_idx", n)

    def init(self, linear_init: Any) -> None:
        """Start at tile number ``linear_init`` (the worker's index)."""
        self._store("current_iter", tirx.IntImm("int32", 0))
        self._store("linear_idx", _expr(linear_init))
        self._update()

    def next_tile(self, step: Any = None) -> None:
        """Advance by ``step`` tiles (default: ``num_workers``). A constant ``step`` below 1 is
        refused; a run-time one fails the call and ends the walk (module docstring)."""
        self._store("current_iter", self.current_iter + 1)
        if step is None:
            self._store("linear_idx", self.linear_idx + self.num_workers)
        else:
            step = _stride("next_tile's step", step)
            _check_stride("next_tile's step", step)
            ok = _at_least_one(step)
            ahead = self.linear_idx + step
            self._store("linear_idx", ahead if ok is None else tirx.Select(ok, ahead, self.total_tiles))
        self._update()

    def valid(self) -> Any:
        """Whether the current tile number is inside the grid (the ``while`` condition); always
        false for a run-time ``num_workers`` below 1, so the walk ends (module docstring)."""
        inside = self.linear_idx < self.total_tiles
        ok = _at_least_one(self.num_workers)
        return inside if ok is None else tirx.And(ok, inside)
