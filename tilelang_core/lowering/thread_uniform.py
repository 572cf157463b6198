"""Which values are the same in every thread of a GPU block, read from a kernel before the frontend step.

TVM's ``ThreadSync`` inserts no barrier inside an ``if`` unless its condition is marked
``T.tvm_thread_invariant`` ("Cannot insert syncs inside condition"). A condition may be marked
only when every thread of the block evaluates it to the same value; :func:`is_uniform` proves that
conservatively, from the kernel as the language wrote it (before ``T.Kernel`` / ``T.Parallel``
are lowered):

* per thread (never uniform): the loop variables of a ``T.Parallel`` nest and of thread-bound
  loops, and everything inside them (:attr:`Ctx.divergent`); any call other than
  ``T.if_then_else`` and the logical-reduction markers (thread indices, atomics, intrinsics);
  ``let`` expressions; variables bound to per-thread values; loops whose bounds are per thread;
  the inside of an ``if`` or ``while`` whose condition is per thread;
* uniform: constants, the kernel's parameters and symbols, block indices, serial loop variables
  of uniform loops, loads of global, shared and fragment memory at uniform indices (shared
  memory is synchronised before such a read by ``ThreadSync``; a fragment read outside
  ``T.Parallel`` lives in shared memory), and loads of a ``local`` buffer whose every store is
  made in uniform code with uniform indices and values (:func:`uniform_local_buffers`, a
  fixpoint: ``mask[i] = Mask[by, bx, k, i]`` in a serial loop, as TileLang kernels fill per-thread
  copies of block-wide data; a counter ``k = 0`` stepped by ``k += 1`` in a ``while k < n:``),
  counting the stores through its views (``StorageRewrite`` merges ``T.alloc_var`` scalars into
  one buffer with views); the body of a loop with ``break``/``continue`` is per-thread control
  flow there (the threads may leave it apart).

:func:`is_uniform` also serves after the frontend step: ``lowering/shared_hazards.py`` proves an
``if`` block-uniform with it, given the thread indices as per-thread variables and its own rule
for loads (``allowed_load``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.core import KERNEL_AXIS_KEY, LOCAL_SCOPES, PARALLEL_MARKER
from ..language.tileops._common import contains, static_int
from .markers import marker_args
from .views import owner_of, view_roots

__all__ = ["Ctx", "is_uniform", "has_exit", "enter_for", "enter_if", "enter_while", "after_bind", "nest_depth",
           "uniform_local_buffers"]


@dataclass(frozen=True)
class Ctx:
    """Where a statement is, for :func:`is_uniform`."""

    divergent: bool = False  # inside a T.Parallel body, a thread-bound loop, or per-thread control flow
    per_thread: tuple = ()  # variables whose value may differ between threads
    uniform_locals: tuple = ()  # local buffers holding the same values in every thread


def is_uniform(expr: Any, ctx: Ctx, allowed_call: Callable[[Any], bool] = lambda call: False,
               allowed_load: Optional[Callable[[Any], bool]] = None) -> bool:
    """Whether ``expr`` has the same value in every thread of the block (module docstring).

    ``allowed_call(call)``: calls (besides ``T.if_then_else``) whose value depends only on their
    arguments, which are checked like the rest of ``expr``. ``allowed_load(load)``: whether a
    load's value is the same in every thread (its indices are checked like the rest), for loads of
    memory other than ``local`` buffers; by default every such load. A load of a ``local`` buffer
    is uniform only when the buffer is in ``ctx.uniform_locals``.
    """
    if ctx.divergent:
        return False
    ok = [True]

    def on_var(var: Any) -> Any:
        if contains(ctx.per_thread, var):
            ok[0] = False
        return var

    def on_load(load: Any) -> Any:
        if str(load.source.ty.storage_scope) in LOCAL_SCOPES:
            ok[0] = ok[0] and contains(ctx.uniform_locals, load.source)
        elif allowed_load is not None:
            ok[0] = ok[0] and allowed_load(load)
        return load

    def on_call(call: Any) -> Any:
        if not (getattr(call.op, "name", "").endswith("if_then_else") or allowed_call(call)):
            ok[0] = False
        return call

    def on_let(let: Any) -> Any:
        ok[0] = False
        return let

    tvm_ffi.structural_map(expr, [(tvm.ir.TensorLoad, on_load), (tvm.ir.Call, on_call), (tvm.ir.Var, on_var),
                                  (tirx.Let, on_let)])
    return ok[0]


def nest_depth(stmt: Any) -> int:
    """ndim of a ``T.Parallel`` marker statement (the loops it announces are per thread), else 0."""
    args = marker_args(stmt, PARALLEL_MARKER, 1)
    return 0 if args is None else (static_int(args[0]) or 0)


def enter_for(loop: Any, ctx: Ctx, parallel_depth: int, allowed_call: Callable = lambda call: False,
              allowed_load: Optional[Callable] = None) -> Ctx:
    """The context of ``loop``'s body; ``parallel_depth > 0``: the loop belongs to a ``T.Parallel`` nest."""
    if parallel_depth or loop.kind == tirx.ForKind.THREAD_BINDING:
        return replace(ctx, divergent=True)
    if KERNEL_AXIS_KEY in loop.annotations:
        return ctx  # block indices are the same in every thread of the block
    if is_uniform(loop.min, ctx, allowed_call, allowed_load) and is_uniform(loop.extent, ctx, allowed_call, allowed_load):
        return ctx
    return replace(ctx, per_thread=ctx.per_thread + (loop.loop_var,), divergent=True)


def enter_if(condition: Any, ctx: Ctx, allowed_call: Callable = lambda call: False,
             allowed_load: Optional[Callable] = None) -> Ctx:
    """The context of the branches of an ``if`` on ``condition``."""
    return ctx if is_uniform(condition, ctx, allowed_call, allowed_load) else replace(ctx, divergent=True)


def enter_while(condition: Any, ctx: Ctx, allowed_call: Callable = lambda call: False,
                allowed_load: Optional[Callable] = None) -> Ctx:
    """The context of the body of a ``while`` on ``condition``."""
    return enter_if(condition, ctx, allowed_call, allowed_load)


def after_bind(stmt: Any, ctx: Ctx, allowed_call: Callable = lambda call: False,
               allowed_load: Optional[Callable] = None) -> Ctx:
    """The context after a ``Bind`` statement (its variable is per thread unless its value is uniform)."""
    if is_uniform(stmt.value, ctx, allowed_call, allowed_load):
        return ctx
    return replace(ctx, per_thread=ctx.per_thread + (stmt.var,))


#: The intrinsics that leave a loop (``T.break_loop()``: ``break`` and ``T.loop_break()`` in kernels).
_EXIT_CALLS = ("tirx.break_loop", "tirx.continue_loop")


def has_exit(body: Any) -> bool:
    """Whether ``body`` holds a ``break`` or ``continue`` (a ``Break``/``Continue`` statement or a
    ``T.break_loop()``/``T.continue_loop()`` call): the threads may leave a loop apart."""
    found = []

    def on_exit(node: Any) -> Any:
        if not isinstance(node, tvm.ir.Call) or getattr(node.op, "name", "") in _EXIT_CALLS:
            found.append(node)
        return node

    tvm_ffi.structural_map(body, [(tirx.Break, on_exit), (tirx.Continue, on_exit), (tvm.ir.Call, on_exit)])
    return bool(found)


def _local_stores(stmt: Any, ctx: Ctx, depth: int, out: list, allowed_call: Callable,
                  allowed_load: Optional[Callable] = None) -> None:
    """``(store, ctx)`` of every store into a local buffer, with the context it runs in. The body
    of a loop holding a ``break``/``continue`` counts as per-thread control flow (after a ``break``
    under a per-thread ``if`` the threads run different iterations)."""
    if stmt is None:
        return
    rules = (allowed_call, allowed_load)
    if isinstance(stmt, tirx.SeqStmt):
        pending = 0
        for s in stmt.seq:
            _local_stores(s, ctx, pending if isinstance(s, tirx.For) else 0, out, *rules)
            pending = nest_depth(s)
            if isinstance(s, tirx.Bind):
                ctx = after_bind(s, ctx, *rules)
        return
    if isinstance(stmt, (tirx.For, tirx.While)):
        if isinstance(stmt, tirx.For):
            inner = enter_for(stmt, ctx, depth, *rules)
        else:
            inner = enter_while(stmt.condition, ctx, *rules)
        if has_exit(stmt.body):
            inner = replace(inner, divergent=True)
        _local_stores(stmt.body, inner, depth - 1 if depth > 1 and isinstance(stmt, tirx.For) else 0, out, *rules)
        return
    if isinstance(stmt, tirx.IfThenElse):
        inner = enter_if(stmt.condition, ctx, *rules)
        _local_stores(stmt.then_case, inner, 0, out, *rules)
        _local_stores(stmt.else_case, inner, 0, out, *rules)
        return
    if isinstance(stmt, tirx.BufferStore):
        if str(stmt.buffer.ty.storage_scope) in LOCAL_SCOPES:
            out.append((stmt, ctx))
        return
    body = getattr(stmt, "body", None)
    if isinstance(body, tirx.Stmt):
        _local_stores(body, ctx, 0, out, *rules)


def uniform_local_buffers(body: Any, allowed_call: Callable = lambda call: False, per_thread: tuple = (),
                          allowed_load: Optional[Callable] = None, excluded: tuple = ()) -> tuple:
    """The ``local`` buffers of ``body`` that hold the same values in every thread (module docstring).

    Starts from every allocated local buffer and drops, until nothing changes, each one with a
    store that is per thread (in divergent code, or with a per-thread index or value). A view
    (``DeclBuffer`` on ``buffer_data`` of a local buffer, as ``StorageRewrite`` merges
    ``T.alloc_var`` scalars) shares its storage: a per-thread store through any of them makes all
    of them per thread. A local buffer whose address is taken (``address_of``: atomics,
    ``T.dp4a``), that is in ``excluded`` (buffers or their data variables: written where this walk
    does not see it), or, with its views, when some local view's storage is not known, is per thread.
    ``per_thread``: variables that differ between the threads from the start (the thread indices
    of a lowered kernel); ``allowed_call`` and ``allowed_load``: as for :func:`is_uniform`.
    """
    allocated: list = []
    excluded = list(excluded)
    views: list = []  # (view, the buffer its data belongs to, or None where unknown)

    def on_alloc(stmt: Any) -> Any:
        if str(stmt.buffer.ty.storage_scope) in LOCAL_SCOPES:
            allocated.append(stmt.buffer)
        return stmt

    def on_decl(stmt: Any) -> Any:
        if str(stmt.buffer.ty.storage_scope) in LOCAL_SCOPES:
            views.append((stmt.buffer, owner_of(stmt.data)))
        return stmt

    def on_call(call: Any) -> Any:
        if getattr(call.op, "name", "") == "tirx.address_of" and call.args and isinstance(call.args[0], tvm.ir.TensorLoad):
            excluded.append(call.args[0].source)
        return call

    tvm_ffi.structural_map(body, [(tirx.AllocBuffer, on_alloc), (tirx.DeclBuffer, on_decl), (tvm.ir.Call, on_call)])
    owner = view_roots(views, allocated)  # (buffer, the allocated buffer of its storage)
    if any(not any(v.same_as(b) for b, _ in owner) for v, _ in views):
        return ()  # a local view of storage this walk does not know: trust no local buffer

    def storage(buf: Any) -> Any:
        return next((o for b, o in owner if b.same_as(buf)), None)

    excluded = tuple(excluded)
    lost = tuple(o for b, o in owner if contains(excluded, b) or contains(excluded, b.data))
    candidates = tuple(b for b in allocated if not contains(lost, b))
    while candidates:
        members = tuple(b for b, o in owner if contains(candidates, o))
        stores: list = []
        ctx = Ctx(per_thread=tuple(per_thread), uniform_locals=members)
        _local_stores(body, ctx, 0, stores, allowed_call, allowed_load)
        bad = tuple(storage(s.buffer) for s, c in stores if contains(members, s.buffer) and not (
            is_uniform(s.value, c, allowed_call, allowed_load)
            and all(is_uniform(i, c, allowed_call, allowed_load) for i in s.indices)))
        if not bad:
            return members
        candidates = tuple(b for b in candidates if not contains(bad, b))
    return ()
