"""``T.any_of`` / ``T.all_of`` markers -> an expression tree, or a loop before the statement.

:mod:`tilelang_core.language.tileops.logical` leaves a marker call
``call_extern("bool", "tl.logical_reduce", kind, loc, x[start], *extents)``.
:func:`lower_logical_reductions` (run by the frontend step, on every target) replaces each one:

* **a tree**, over at most :data:`~tilelang_core.language.tileops.logical.TREE_LIMIT` static
  elements: the elements' tests joined by a balanced tree of ``||`` (``&&``);
* **hoisted**, over more (or a run-time count of) elements where a statement can precede the use
  (a condition of ``if``, the value or an index of a store, a bound value, an evaluated call):
  right before the statement that holds the marker::

      flag = T.alloc_local((1,), "bool")     # "local": per thread on GPU targets
      flag[0] = False                        # True for all_of
      for k0, k1, ... over the region:       # guarded, see below
          flag[0] = flag[0] || (x[start + k] != 0)     # && for all_of
      ... the statement, with flag[0] for the marker ...

  A marker in the second operand of ``and``/``or``, or in a branch of ``T.if_then_else`` /
  ``T.Select``, is computed only when that operand would be (``if a and T.any_of(M[i, 0:n])``
  reads ``M`` only when ``a`` holds), so guards written in the same expression still protect
  the reads.
* **kept as an expression** where a statement cannot go (the condition of a ``while`` loop, a
  loop bound, an attribute value, the body of a ``let`` expression, an assertion): a static extent
  becomes the tree (up to :data:`TREE_MAX` elements); a run-time one is a :class:`LoweringError`
  at the marker's line.

On GPU targets an ``if`` whose condition holds a marker and whose body touches shared memory
(or fragments, which may live there) is marked thread-invariant (``T.tvm_thread_invariant``,
which TVM's ``ThreadSync`` reads) when its condition is provably the same in every thread of the
block (:mod:`tilelang_core.lowering.thread_uniform`). Its body may then hold barriers
(``if T.any_of(Mask[by, bx, k, :]):`` around tile copies into shared memory and ``T.gemm``);
without the mark TVM refuses them ("Cannot insert syncs inside condition"). The condition is
computed into a variable before the ``if``, followed by a barrier: ``ThreadSync`` counts a
barrier inside an invariant ``if`` as if it always ran, and this one orders the accesses before
the ``if`` with those after it (or in the next loop iteration) whichever branch runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.tileops._common import static_int
from ..language.tileops.logical import LOGICAL_CALL, TREE_LIMIT, combine, element_test, region_elements
from .atomics import checked_map
from .markers import marker_call_args
from .thread_uniform import Ctx, after_bind, enter_for, enter_if, enter_while, is_uniform, nest_depth, uniform_local_buffers

__all__ = ["lower_logical_reductions", "TREE_MAX"]

#: Largest element count written as an expression tree where no loop can be placed.
TREE_MAX = 4096


def _marker(expr: Any) -> Optional[tuple]:
    """``(kind, loc, load, extents)`` of a marker call, else None."""
    args = marker_call_args(expr, LOGICAL_CALL)
    if args is None or len(args) < 3:
        return None
    return args[0].value, args[1].value, args[2], args[3:]


def _has_marker(node: Any) -> bool:
    found = []

    def on_call(call: Any) -> Any:
        if not found and _marker(call) is not None:
            found.append(call)
        return call

    tvm_ffi.structural_map(node, [(tvm.ir.Call, on_call)])
    return bool(found)


def _count(extents: list) -> Optional[int]:
    total = 1
    for e in extents:
        value = static_int(e)
        if value is None:
            return None
        total *= value
    return total


def _describe(kind: str, load: Any, extents: list) -> str:
    parts = []
    for index, extent in zip(load.indices, extents):
        if static_int(extent) == 1:
            parts.append(str(index))
        elif static_int(index) == 0:
            parts.append(f"0:{extent}")
        else:
            parts.append(f"{index}:{index} + {extent}")
    return f"T.{kind}_of({load.source}[{', '.join(parts)}])"


def _tree(kind: str, loc: str, load: Any, extents: list, where: str) -> Any:
    """The marker as a balanced expression tree (static extents), else a LoweringError."""
    count = _count(extents)
    if count is None:
        raise LoweringError(
            f"{loc}: {_describe(kind, load, extents)}: an extent known only at run time is computed by a loop "
            f"placed before the statement, and {where} has no such place; compute it into a T.alloc_var first "
            "(before the loop and again at the end of its body for a while condition) and use that variable"
        )
    if count > TREE_MAX:
        raise LoweringError(
            f"{loc}: {_describe(kind, load, extents)} over {count} elements in {where} would be an expression of "
            f"{count} terms (at most {TREE_MAX} here); compute it into a T.alloc_var before and use that variable"
        )
    return combine(kind, [element_test(x) for x in region_elements(load.source, list(load.indices), extents)])


def _fixed(expr: Any, where: str) -> Any:
    """``expr`` with every marker written as an expression tree (no statement can be added)."""
    if not _has_marker(expr):
        return expr

    def on_call(call: Any) -> Any:
        m = _marker(call)
        if m is None:
            return call
        kind, loc, load, extents = m
        return _tree(kind, loc, load, extents, where)

    return checked_map(expr, [(tvm.ir.Call, on_call)])


def _and(guard: Optional[Any], cond: Any) -> Any:
    return cond if guard is None else tirx.And(guard, cond)


def _allowed(call: Any) -> bool:
    return _marker(call) is not None  # its value depends on its operands, checked with the rest


class _Hoister:
    """Rewrites one statement's expressions, collecting the statements to place before it."""

    def __init__(self) -> None:
        self.before: list = []

    def expr(self, e: Any, guard: Optional[Any] = None) -> Any:
        """``e`` with its markers replaced by trees, or by flags computed in :attr:`before`."""
        if not isinstance(e, tvm.ir.Expr) or not _has_marker(e):
            return e
        m = _marker(e)
        if m is not None:
            return self.reduction(m, guard)
        if isinstance(e, tirx.And):
            a = self.expr(e.a, guard)
            return tirx.And(a, self.expr(e.b, _and(guard, a)))
        if isinstance(e, tirx.Or):
            a = self.expr(e.a, guard)
            return tirx.Or(a, self.expr(e.b, _and(guard, tirx.Not(a))))
        if isinstance(e, tirx.Select):
            c = self.expr(e.condition, guard)
            return tirx.Select(c, self.expr(e.true_value, _and(guard, c)), self.expr(e.false_value, _and(guard, tirx.Not(c))))
        if isinstance(e, tvm.ir.Call) and getattr(e.op, "name", "").endswith("if_then_else") and len(e.args) == 3:
            c = self.expr(e.args[0], guard)
            t = self.expr(e.args[1], _and(guard, c))
            f = self.expr(e.args[2], _and(guard, tirx.Not(c)))
            return tirx.if_then_else(c, t, f)
        if isinstance(e, tirx.Let):
            return tirx.Let(e.var, self.expr(e.value, guard), _fixed(e.body, "the body of a let expression"))

        def on_node(node: Any) -> Any:
            return node if node.same_as(e) else self.expr(node, guard)

        special = (tirx.And, tirx.Or, tirx.Select, tirx.Let, tvm.ir.Call)
        return checked_map(e, [(special, on_node)], order="pre")

    def reduction(self, marker: tuple, guard: Optional[Any]) -> Any:
        """One marker: its tree, or its loop placed in :attr:`before` and the load of its flag."""
        kind, loc, load, extents = marker
        indices = [self.expr(i, guard) for i in load.indices]
        extents = [self.expr(x, guard) for x in extents]
        count = _count(extents)
        if count is not None and count <= TREE_LIMIT:
            return combine(kind, [element_test(x) for x in region_elements(load.source, indices, extents)])
        flag = tirx.decl_buffer([1], "bool", name=f"{kind}_of_flag", scope="local")
        init = tirx.IntImm("bool", 1 if kind == "all" else 0)
        zero = tirx.IntImm("int32", 0)
        loop_vars = []
        point = []
        for d, (start, extent) in enumerate(zip(indices, extents)):
            if static_int(extent) == 1:
                point.append(start)
                continue
            dtype = str(extent.ty.dtype)
            var = tirx.Var(f"{kind}_of_k{d}", dtype)
            loop_vars.append((var, extent))
            if static_int(start) == 0:
                point.append(var)
            else:
                offset = var if str(start.ty.dtype) == dtype else tirx.Cast(str(start.ty.dtype), var)
                point.append(start + offset)
        test = element_test(load.source[tuple(point)])
        step = tirx.Or(flag[zero], test) if kind == "any" else tirx.And(flag[zero], test)
        body: Any = tirx.BufferStore(flag, step, [zero])
        for var, extent in reversed(loop_vars):
            body = tirx.For(var, tirx.IntImm(str(var.ty.dtype), 0), extent, tirx.ForKind.SERIAL, body)
        if guard is not None:
            body = tirx.IfThenElse(guard, body, None)
        self.before.extend([tirx.AllocBuffer(flag), tirx.BufferStore(flag, init, [zero]), body])
        return flag[zero]


def _block(stmts: list) -> Any:
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _shared_scopes(*stmts: Any) -> list:
    """The shared-memory scopes the statements touch (a fragment may be placed in shared memory):
    where an ``if`` around them may need barriers."""
    found: set = set()

    def note(buffer: Any) -> None:
        scope = str(buffer.ty.storage_scope)
        if scope in ("shared", "shared.dyn"):
            found.add(scope)
        elif scope == "local.fragment":
            found.add("shared")

    def on_load(load: Any) -> Any:
        note(load.source)
        return load

    def on_store(store: Any) -> Any:
        note(store.buffer)
        return store

    for stmt in stmts:
        if stmt is not None:
            tvm_ffi.structural_map(stmt, [(tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store)])
    return sorted(found)


@dataclass(frozen=True)
class _Where:
    """Where a statement is: the target family, and what differs between a block's threads."""

    gpu: bool
    threads: Ctx


def _rewrite(stmt: Any, where: _Where, parallel_depth: int = 0) -> list:
    """``stmt`` as a list of statements: the hoisted loops, then ``stmt`` without markers.

    ``parallel_depth``: how many loops of a ``T.Parallel`` nest start at ``stmt``.
    """
    if stmt is None or not _has_marker(stmt):
        return [stmt]
    ctx = where.threads
    if isinstance(stmt, tirx.SeqStmt):
        out: list = []
        depth = 0
        for s in stmt.seq:
            out.extend(_rewrite(s, where, depth if isinstance(s, tirx.For) else 0))
            depth = nest_depth(s)
            if isinstance(s, tirx.Bind):
                where = replace(where, threads=after_bind(s, where.threads, _allowed))
        return [tirx.SeqStmt(out)]
    if isinstance(stmt, tirx.For):
        inner = replace(where, threads=enter_for(stmt, ctx, parallel_depth, _allowed))
        body = _rewrite(stmt.body, inner, parallel_depth - 1 if parallel_depth > 1 else 0)
        return [tirx.For(stmt.loop_var, _fixed(stmt.min, "a loop bound"), _fixed(stmt.extent, "a loop bound"),
                         stmt.kind, _block(body), stmt.thread_binding, stmt.annotations, stmt.step, stmt.span)]
    if isinstance(stmt, tirx.While):
        inner = replace(where, threads=enter_while(stmt.condition, ctx, _allowed))
        return [tirx.While(_fixed(stmt.condition, "the condition of a while loop"), _block(_rewrite(stmt.body, inner)),
                           stmt.span)]
    if isinstance(stmt, tirx.AttrStmt):
        return [tirx.AttrStmt(stmt.node, stmt.attr_key, _fixed(stmt.value, "an attribute value"),
                              _block(_rewrite(stmt.body, where)), stmt.span)]
    h = _Hoister()
    if isinstance(stmt, tirx.IfThenElse):
        scopes = _shared_scopes(stmt.then_case, stmt.else_case) if where.gpu else []
        uniform = bool(scopes) and is_uniform(stmt.condition, ctx, _allowed)
        cond = h.expr(stmt.condition)
        if uniform:  # the value, then a barrier, then the marked if (module docstring)
            value = tirx.Var("uniform_cond", "bool")
            h.before.append(tirx.Bind(value, cond))
            for scope in scopes:
                h.before.append(tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", tvm.ir.StringImm(scope))))
            cond = tirx.call_intrin("bool", "tirx.tvm_thread_invariant", value)
        inner = replace(where, threads=enter_if(stmt.condition, ctx, _allowed))
        else_case = _block(_rewrite(stmt.else_case, inner)) if stmt.else_case is not None else None
        new = tirx.IfThenElse(cond, _block(_rewrite(stmt.then_case, inner)), else_case, stmt.span)
    elif isinstance(stmt, tirx.BufferStore):
        value = h.expr(stmt.value)
        new = tirx.BufferStore(stmt.buffer, value, [h.expr(i) for i in stmt.indices])
    elif isinstance(stmt, tirx.Evaluate):
        new = tirx.Evaluate(h.expr(stmt.value), stmt.span)
    elif isinstance(stmt, tirx.Bind):
        new = tirx.Bind(stmt.var, h.expr(stmt.value), stmt.span)
    else:  # statements that hold no expression a loop could precede (assertions, allocations, ...)
        new = _fixed(stmt, f"a {type(stmt).__name__} statement")
    return [*h.before, new]


def lower_logical_reductions(func: tirx.PrimFunc, gpu: bool = False) -> tirx.PrimFunc:
    """``func`` without ``T.any_of``/``T.all_of`` markers (see the module docstring); ``gpu``:
    the target spreads a block over threads (conditions may be marked thread-invariant)."""
    if not _has_marker(func.body):
        return func
    threads = Ctx(uniform_locals=uniform_local_buffers(func.body, _allowed)) if gpu else Ctx()
    return func.with_body(_block(_rewrite(func.body, _Where(gpu, threads))))
