"""Which threads run a ``T.Parallel`` nest that writes per-thread ``local`` tiles (GPU targets).

A ``T.alloc_local`` tile (scope ``local``, also ``T.alloc_var`` scalars) is private to each
thread. The frontend spreads a ``T.Parallel`` nest over the block's threads (iteration ``f`` in
thread ``f % threads``), so a nest writing such a tile left each thread with the elements of its
own iterations only, and code that then read the whole tile (a serial loop, ``T.reduce_*``, a
``T.copy`` in another order) read other threads' elements as garbage, silently.

* :func:`plan` finds the nests whose only effect is storing into ``local`` tiles declared outside
  them (they may read global, shared and local memory, and hold ``T.device_assert``): they run
  **whole in every thread**, as serial loops, so every thread holds the full tile. This is
  TileLang's rule (``src/transform/lower_tile_op.cc``: a parallel loop is partitioned over the
  threads only when it stores into a non-``local`` buffer or touches a fragment).
* Every other nest is spread as before (fragments keep their one-owner-per-element layout).
  When a spread nest also stores into an outer ``local`` tile (``L[i] = A[i]; F[i] = L[i]``
  with ``F`` a fragment), each thread still holds only its own iterations' elements. That is
  right while the tile is read where the same thread wrote the element: in that nest, or in a
  spread nest of the same iteration count reading it at the same flat iteration (checked by
  simplifying both indices over one flat index). :func:`plan` refuses any other read of it (a
  serial loop over it, a ``T.reduce_*``, a nest in another order, a pointer to it) with a
  :class:`LoweringError` naming the reading line and the writing loop.

Reducers (``T.alloc_reducer``: ``local`` buffers combined by ``T.finalize_reducer``) are per-thread
partial results by design: nests updating them stay spread, and their reads are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.core import LOCAL_SCOPES
from ..language.spans import node_location, span_to_location
from ..language.tileops._common import FRAGMENT_SCOPE, collect, contains, scope_of, substitute
from ..language.tileops.debug import DEVICE_ASSERT_CALL
from ..language.registered_ops import ADDRESS_OPS
from ..language.tileops.reducer import FINALIZE_CALL, UPDATE_KEY
from .atomics import contains_atomics
from .markers import extern_name, marker_call_args, parallel_loops, parallel_ndim
from .parallel_order import loop_values, static_count
from .warp import BLOCK_VOTES, COLLECTIVE, MASKED_WARP_OPS

__all__ = ["NestPlan", "plan"]

#: Warp and block collectives: which threads run an iteration matters to them.
_COLLECTIVES = COLLECTIVE + MASKED_WARP_OPS + BLOCK_VOTES


@dataclass
class NestPlan:
    """What :func:`plan` decided for the ``T.Parallel`` nests of one GPU ``T.Kernel`` body."""

    per_thread: list = field(default_factory=list)  # outer For of each nest that runs whole in every thread

    def runs_per_thread(self, loop: Any) -> bool:
        """Whether the nest whose outer loop is ``loop`` runs whole in every thread."""
        return any(loop.same_as(x) for x in self.per_thread)


@dataclass
class _Nest:
    loops: list  # the nest's loops, outermost first
    local_writes: list  # outer local tiles it stores into (not reducers)
    spread_reason: Optional[str]  # why it is spread over the threads (None: nothing but local stores)


def _is_local(buffer: Any) -> bool:
    return scope_of(buffer) in LOCAL_SCOPES


def _reducers(body: Any) -> list:
    """The reducer buffers of a kernel body (finalized, or updated with ``T.reducer_update``)."""
    found: list = []
    for call in collect(body, tvm.ir.Call):
        args = marker_call_args(call, FINALIZE_CALL)
        if args and len(args) == 3 and isinstance(args[2], tvm.ir.Call) and args[2].args:
            found.append(args[2].args[0].source)
    for attr in collect(body, tirx.AttrStmt):
        if attr.attr_key == UPDATE_KEY:
            found.extend(s.buffer for s in collect(attr.body, tirx.BufferStore))
    return found


def _nests(body: Any) -> list:
    """``[loops]`` of every ``T.Parallel`` nest in ``body`` (outermost loop first)."""
    found = []
    for seq in collect(body, tirx.SeqStmt):
        stmts = list(seq.seq)
        for marker, loop in zip(stmts, stmts[1:]):
            ndim = parallel_ndim(marker)
            if ndim is None or not isinstance(loop, tirx.For):
                continue
            found.append(parallel_loops(loop, ndim))
    return found


def _classify(loops: list, reducers: list) -> _Nest:
    """The local tiles a nest writes, and the first thing in it that needs it spread."""
    body = loops[-1].body
    inner = [a.buffer for a in collect(body, (tirx.AllocBuffer, tirx.DeclBuffer))]
    writes: list = []
    reasons: list = []
    for store in collect(body, tirx.BufferStore):
        buffer = store.buffer
        if contains(inner, buffer):
            continue
        if contains(reducers, buffer):
            reasons.append(f"updates the reducer '{buffer}'")
        elif _is_local(buffer):
            if not contains(writes, buffer):
                writes.append(buffer)
        else:
            reasons.append(f"stores into the {scope_of(buffer)} buffer '{buffer}'")
    for load in collect(body, tvm.ir.TensorLoad):
        if scope_of(load.source) == FRAGMENT_SCOPE:
            reasons.append(f"reads the fragment '{load.source}'")
    if contains_atomics(body):
        reasons.append("makes atomic updates")
    from .intrinsics import parse  # lazily, as lowering/warp.py does

    for call in collect(body, tvm.ir.Call):
        if getattr(call.op, "name", "") in ADDRESS_OPS:
            first = call.args[0] if call.args else None
            if not (isinstance(first, tvm.ir.TensorLoad) and _is_local(first.source)):
                reasons.append("takes the address of a buffer that is not local")
        m = parse(call)
        if m is not None and m.name in _COLLECTIVES:
            reasons.append(f"calls T.{m.name}, which needs the threads together")
    for stmt in collect(body, tirx.Evaluate):
        if isinstance(stmt.value, tvm.ir.Call) and extern_name(stmt.value) != DEVICE_ASSERT_CALL:
            reasons.append("has a call statement (T.print, T.call_extern, a barrier, ...)")
    return _Nest(loops, writes, reasons[0] if reasons else None)


class _Owner:
    """Which flat iteration of a spread nest wrote each element of a local tile (when provable)."""

    def __init__(self, nest: _Nest, buffer: Any):
        self.total = static_count(nest.loops)
        self.flat = tirx.Var("flat", "int32")
        self.index: Optional[list] = None
        stores = [s for s in collect(nest.loops[-1].body, tirx.BufferStore) if s.buffer.same_as(buffer)]
        patterns = {str(list(s.indices)) for s in stores}
        if self.total is not None and len(patterns) == 1:  # one index pattern in a static nest
            self.index = self._at_flat(nest.loops, list(stores[0].indices))

    def _at_flat(self, loops: list, indices: list) -> Optional[list]:
        """``indices`` as expressions of the flat iteration (None: they use variables bound inside
        the nest, an inner loop's or a ``T.bind``'s, so one iteration may touch several elements)."""
        body = loops[-1].body
        inner = [f.loop_var for f in collect(body, tirx.For)] + [b.var for b in collect(body, (tirx.Bind, tirx.LetStmt))]
        values = [substitute(i, loop_values(loops, self.flat)) for i in indices]
        for value in values:
            if any(contains(inner, v) for v in collect(value, tvm.ir.Var)):
                return None
        analyzer = tvm.sym.Analyzer()
        analyzer.bind(self.flat, tvm.ir.Range(0, self.total))
        return [analyzer.simplify(v) for v in values]

    def reads_own(self, nest: _Nest, load: Any) -> bool:
        """Whether ``load`` (in the spread ``nest``) reads, at each iteration, what that iteration's
        thread wrote: same iteration count, same element at every flat iteration."""
        if self.index is None or static_count(nest.loops) != self.total:
            return False
        mine = self._at_flat(nest.loops, list(load.indices))
        return mine is not None and len(mine) == len(self.index) and all(
            tvm_ffi.structural_equal(a, b) for a, b in zip(self.index, mine))


def plan(body: Any, threads: int, kernel_loc: str) -> NestPlan:
    """Decide who runs each ``T.Parallel`` nest of one GPU ``T.Kernel`` body (module docstring).

    :raises LoweringError: a local tile written by a spread nest is read where another thread's
        iterations wrote it (the message names the reading line and the writing loop).
    """
    reducers = _reducers(body)
    nests = [_classify(loops, reducers) for loops in _nests(body)]
    result = NestPlan([n.loops[0] for n in nests if n.local_writes and n.spread_reason is None])
    if threads == 1:
        return result
    for nest in nests:
        if nest.spread_reason is None:
            continue
        for buffer in nest.local_writes:
            _check_reads(body, nest, buffer, nests, kernel_loc)
    return result


def _check_reads(body: Any, writer: _Nest, buffer: Any, nests: list, kernel_loc: str) -> None:
    """Refuse a read of ``buffer`` (written by spread ``writer``) that another thread's iteration wrote."""
    owner = _Owner(writer, buffer)
    allowed = [load for load in collect(writer.loops[0], tvm.ir.TensorLoad) if load.source.same_as(buffer)]
    for nest in nests:
        if nest is writer or nest.spread_reason is None:
            continue
        allowed.extend(load for load in collect(nest.loops[0], tvm.ir.TensorLoad)
                       if load.source.same_as(buffer) and owner.reads_own(nest, load))
    bad = [load for load in collect(body, tvm.ir.TensorLoad) if load.source.same_as(buffer) and not contains(allowed, load)]
    if not bad:
        return
    # the innermost statement with a location that holds the read (pre-order: parents first)
    holders = [s for s in collect(body, tirx.Stmt)
               if span_to_location(getattr(s, "span", None)) and contains(collect(s, tvm.ir.TensorLoad), bad[0])]
    where = node_location(holders[-1], kernel_loc) if holders else kernel_loc
    wrote = node_location(writer.loops[0], kernel_loc)
    raise LoweringError(
        f"{where}: the local tile '{buffer}' is read here, but the T.Parallel loop at {wrote} writes it "
        f"spread over the block's threads (that loop also {writer.spread_reason}), so each thread holds only "
        f"the elements of its own iterations and this read would see other threads' elements as garbage. "
        f"Write '{buffer}' in a T.Parallel loop of its own that stores only into local tiles (such a loop "
        f"runs whole in every thread), or allocate it with T.alloc_fragment or T.alloc_shared"
    )
