"""Block barriers for the shared-memory hazards TVM's ``ThreadSync`` does not see.

TVM 0.27's ``ThreadSync("shared")`` walks each statement sequence of a GPU kernel and puts a
``__syncthreads()`` before a statement that reads what an earlier one wrote (read after write) or
writes what an earlier one read (write after read). Two cases it misses, both silent wrong
results:

* **Write after write.** ``T.fill(S, a)`` then ``T.fill(S[0:16, 2:3], b)`` (or a ``T.copy`` into
  part of ``S``): each ``T.Parallel`` nest gives an element to another thread, and nothing orders
  the first fill's store of one thread before the second fill's store of another, so the first
  value may land last.
* **Views with another element size.** ``V = T.view(S, (64,), "float32")`` of an ``int64`` tile
  is a buffer on the same storage; ``ThreadSync`` compares indices of the two buffers as if they
  counted the same elements (``S[t]`` and ``V[t]`` look like the same element, each thread's
  own), so reads through the view get no barrier after the writes into ``S``.

:func:`PlanSharedBarriers` runs right before ``ThreadSync`` and places the barriers itself, with
the same model as ``ThreadSync`` (the statements of one sequence, a compound statement stands for
all its accesses, a barrier goes right before the statement that needs it, loop bodies are checked
once more against the next iteration) plus those two conflicts: a write after a write of the same
storage, and any read/write pair of one storage whose element sizes differ. Two accesses of one
element index, in the same dtype size, conflict nowhere only when that index uses every thread
index of the block (each thread touches its own element); ``ThreadSync`` checks the innermost one
only, this pass every ``threadIdx`` axis with more than one thread. All ``shared.dyn`` buffers
count as one storage (they share one allocation later), as in ``ThreadSync``.

A barrier is placed only where every thread of the block reaches it: never inside an ``if`` or
``while`` whose condition is not marked ``T.tvm_thread_invariant``, nor inside a loop whose bounds
depend on the thread (thread index, per-thread values, loads). A hazard there is left as before
(``ThreadSync`` itself refuses read/write hazards inside such an ``if``), and the missing barrier
does not count as one for the code around it: every access inside the ``if`` is still checked
against the code before the ``if`` (a barrier before it) and after it (a barrier after it).
``ThreadSync`` still runs afterwards: it counts these barriers and adds none where they already
order the accesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, substitute

__all__ = ["PlanSharedBarriers", "plan_shared_barriers"]

_SHARED = "shared"
_DYN = "shared.dyn"
_SYNC_OP = "tirx.tvm_storage_sync"
_INVARIANT_OP = "tirx.tvm_thread_invariant"
_ACCESS_PTR_OP = "tirx.tvm_access_ptr"


@dataclass
class _Access:
    kind: str  # "R" read, "W" write, "S" barrier
    key: Any = None  # the data var, or _DYN for every shared.dyn buffer
    bits: int = 0  # size of the element the indices count
    points: Optional[tuple] = None  # the index expressions, None where a range
    threads: tuple = ()  # threadIdx vars of extent > 1 around the access


def _barrier() -> Any:
    return tirx.Evaluate(tirx.call_intrin("int32", _SYNC_OP, tvm.ir.StringImm(_SHARED)))


def _op(call: Any) -> str:
    return getattr(call.op, "name", "")


def _bits(dtype: Any) -> int:
    d = tvm.runtime.DataType(str(dtype))
    return int(d.bits) * int(d.lanes)


def _buffer_of(data: Any) -> Any:
    """The buffer ``data`` (a buffer's ``.data``: ``buffer_data(B)``) belongs to, else ``data``."""
    if isinstance(data, tvm.ir.Call) and _op(data) == "tirx.buffer_data":
        return data.args[0]
    return data


def _uses(expr: Any, var: Any) -> bool:
    return any(v.same_as(var) for v in collect(expr, tvm.ir.Var))


def _has_load(expr: Any) -> bool:
    return bool(collect(expr, tvm.ir.TensorLoad))


def _same_key(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.same_as(b)


def _conflict(prev: _Access, curr: _Access) -> bool:
    """Whether ``prev`` (earlier, no barrier since) and ``curr`` may touch one element from two threads."""
    if not _same_key(prev.key, curr.key):
        return False
    if not curr.threads:  # one thread per block: nothing to order
        return False
    if prev.bits != curr.bits:  # views with another element size: indices count other units
        return True
    if prev.points is None or curr.points is None or len(prev.points) != len(curr.points):
        return True
    if not all(tvm_ffi.structural_equal(a, b) for a, b in zip(prev.points, curr.points)):
        return True
    # the same index expression: one element per thread only when it uses every thread axis
    return not all(any(_uses(p, t) for p in curr.points) for t in curr.threads)


class _Planner:
    """Walks a kernel like ``ThreadSync``'s access visitor and records where barriers go."""

    def __init__(self) -> None:
        self.threads: list = []  # threadIdx vars of extent > 1 in scope
        self.in_device = False
        self.binds: list = []  # (var, value) of Bind/LetStmt, values with earlier binds substituted
        self.divergent = 0  # nesting depth of per-thread control flow
        self.scopes: list = []  # stack of [(stmt, [accesses])]
        self.marks: dict = {}  # stmt -> True: a barrier right before it
        self.missed: list = []  # statements that need a barrier where none can go
        self.views: dict = {}  # buffer of a DeclBuffer -> the buffer that owns its storage

    def _key(self, data: Any, scope: str) -> Any:
        """What identifies the storage behind ``data``: the allocated buffer (views lead to it),
        or _DYN for every shared.dyn buffer; None outside shared memory."""
        if scope == _DYN:
            return _DYN
        if scope != _SHARED:
            return None
        buf = _buffer_of(data)
        return self.views.get(buf, buf)

    # -- expressions --------------------------------------------------------------------
    def _subst(self, expr: Any) -> Any:
        return substitute(expr, self.binds[::-1])  # the innermost binding of a variable first

    def _points(self, indices: Any) -> Optional[tuple]:
        out = []
        for index in indices:
            if "x" in str(index.ty):  # a vector of indices (Ramp, Broadcast): a range
                return None
            out.append(self._subst(index))
        return tuple(out)

    def _expr_accesses(self, expr: Any) -> list:
        found: list = []

        def on_node(node: Any) -> None:
            if isinstance(node, tvm.ir.TensorLoad):
                src = node.source
                key = self._key(src.data, str(src.scope()))
                if key is not None:
                    found.append(_Access("R", key, _bits(src.dtype), self._points(node.indices), tuple(self.threads)))
            elif isinstance(node, tvm.ir.Call):
                name = _op(node)
                if name == _SYNC_OP and str(node.args[0].value) != "warp":
                    found.append(_Access("S"))
                elif name == _ACCESS_PTR_OP:
                    var = node.args[1]
                    scope = str(getattr(var.ty, "storage_scope", "") or "")
                    key = self._key(var, scope)
                    flag = node.args[4]
                    if key is not None and isinstance(flag, tirx.IntImm):
                        bits = _bits(node.args[0].ty)
                        if int(flag.value) & 1:
                            found.append(_Access("R", key, bits, None, tuple(self.threads)))
                        if int(flag.value) & 2:
                            found.append(_Access("W", key, bits, None, tuple(self.threads)))

        tvm_ffi.structural_walk(expr, ((tvm.ir.TensorLoad, tvm.ir.Call), on_node), order="pre")
        return found

    def _thread_dependent(self, expr: Any) -> bool:
        expr = self._subst(expr)
        return _has_load(expr) or any(_uses(expr, t) for t in self.threads)

    # -- statements ---------------------------------------------------------------------
    def _record(self, stmt: Any, accesses: list, always: bool = False) -> None:
        if self.in_device and (accesses or always):
            self.scopes[-1].append((stmt, accesses))

    def visit(self, stmt: Any) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.visit(s)
        elif isinstance(stmt, tirx.BufferStore):
            acc = []
            key = self._key(stmt.buffer.data, str(stmt.buffer.scope()))
            if key is not None:
                acc.append(_Access("W", key, _bits(stmt.buffer.dtype), self._points(stmt.indices), tuple(self.threads)))
            for index in stmt.indices:
                acc += self._expr_accesses(index)
            acc += self._expr_accesses(stmt.value)
            self._record(stmt, acc, always=True)
        elif isinstance(stmt, tirx.Evaluate):
            self._record(stmt, self._expr_accesses(stmt.value))
        elif isinstance(stmt, (tirx.Bind, tirx.LetStmt)):
            self._record(stmt, self._expr_accesses(stmt.value), always=True)
            self.binds.append((stmt.var, self._subst(stmt.value)))
        elif isinstance(stmt, tirx.AttrStmt):
            self._visit_attr(stmt)
        elif isinstance(stmt, tirx.For):
            self._visit_for(stmt)
        elif isinstance(stmt, tirx.IfThenElse):
            self._visit_if(stmt)
        elif isinstance(stmt, tirx.While):
            self._visit_while(stmt)
        elif isinstance(stmt, tirx.DeclBuffer):  # a view: the same storage as the buffer it is on
            owner = _buffer_of(stmt.data)
            if not owner.same_as(stmt.buffer):
                self.views[stmt.buffer] = self.views.get(owner, owner)
        # AllocBuffer, Break, Continue, ...: no accesses

    def _visit_attr(self, stmt: Any) -> None:
        if stmt.attr_key != "thread_extent":
            self.visit(stmt.body)
            return
        iv = stmt.node
        extent = stmt.value
        counted = str(iv.thread_tag).startswith("threadIdx") and not (
            isinstance(extent, tirx.IntImm) and int(extent.value) == 1)
        if counted:
            self.threads.append(iv.var)
        if not self.in_device:
            self.in_device = True
            self.scopes.append([])
            self.visit(stmt.body)
            self._summarize(self.scopes.pop(), None)
            self.in_device = False
        else:
            self.visit(stmt.body)
        if counted:
            self.threads.pop()

    def _scoped(self, body: Any, divergent: bool, loop: Any = None) -> list:
        self.divergent += divergent
        self.scopes.append([])
        nbinds = len(self.binds)
        self.visit(body)
        del self.binds[nbinds:]
        out = self._summarize(self.scopes.pop(), loop)
        self.divergent -= divergent
        return out

    def _visit_for(self, stmt: Any) -> None:
        if not self.in_device:
            self.visit(stmt.body)
            return
        divergent = self._thread_dependent(stmt.min) or self._thread_dependent(stmt.extent)
        acc = self._scoped(stmt.body, divergent, loop=stmt)
        one = isinstance(stmt.extent, tirx.IntImm) and int(stmt.extent.value) == 1
        for a in acc:
            if a.points is not None and any(_uses(p, stmt.loop_var) for p in a.points):
                if one:
                    m = [(stmt.loop_var, self._subst(stmt.min))]
                    a.points = tuple(substitute(p, m) for p in a.points)
                else:
                    a.points = None  # relaxed over the loop: a range
        self._record(stmt, acc)

    def _visit_if(self, stmt: Any) -> None:
        if not self.in_device:
            self.visit(stmt.then_case)
            if stmt.else_case is not None:
                self.visit(stmt.else_case)
            return
        cond = stmt.condition
        divergent = not (isinstance(cond, tvm.ir.Call) and _op(cond) == _INVARIANT_OP)
        acc = self._scoped(stmt.then_case, divergent)
        if stmt.else_case is not None:
            acc = acc + self._scoped(stmt.else_case, divergent)
        self._record(stmt, acc, always=True)

    def _visit_while(self, stmt: Any) -> None:
        if not self.in_device:
            self.visit(stmt.body)
            return
        cond = stmt.condition
        divergent = not (isinstance(cond, tvm.ir.Call) and _op(cond) == _INVARIANT_OP)
        self._record(stmt, self._scoped(stmt.body, divergent), always=True)

    # -- planning (ThreadSync's Summarize, with the extra conflicts) -----------------------
    def _mark(self, stmt: Any) -> None:
        if self.divergent:
            self.missed.append(stmt)
        else:
            self.marks[stmt] = True

    def _needs_sync(self, acc: list, reads: list, writes: list) -> bool:
        for a in acc:
            if a.kind == "R" and any(_conflict(w, a) for w in writes):
                return True
            if a.kind == "W" and any(_conflict(p, a) for p in reads + writes):
                return True
            if a.kind == "S":
                reads.clear()
                writes.clear()
        return False

    def _summarize(self, seq: list, loop: Any) -> list:
        reads: list = []
        writes: list = []
        synced = set()
        for i, (stmt, acc) in enumerate(seq):
            sync = stmt in self.marks or self._needs_sync(acc, reads, writes)
            if sync:
                reads.clear()
                writes.clear()
                if stmt not in self.marks:
                    self._mark(stmt)
                if stmt in self.marks:  # placed: a barrier where every thread passes
                    synced.add(i)
            for a in acc:
                if a.kind == "R":
                    reads.append(a)
                elif a.kind == "W":
                    writes.append(a)
                else:
                    reads.clear()
                    writes.clear()
        if loop is not None:  # the next iteration against what this one left unsynchronised
            for i, (stmt, acc) in enumerate(seq):
                if i in synced or not (reads or writes):
                    break
                if self._needs_sync(acc, reads, writes):
                    self._mark(stmt)
                    if stmt in self.marks:
                        synced.add(i)
                    break
        head: list = []
        tail: list = []
        count = 0
        for i, (stmt, acc) in enumerate(seq):
            if i in synced:
                if count:
                    tail.clear()
                else:
                    head.append(_Access("S"))
                count += 1
            for a in acc:
                if a.kind == "S":
                    if count:
                        tail.clear()
                    else:
                        head.append(_Access("S"))
                    count += 1
                else:
                    (tail if count else head).append(_Access(a.kind, a.key, a.bits, a.points, a.threads))
        return head + tail


def _insert(stmt: Any, marks: dict) -> Any:
    """``stmt`` with a barrier right before every statement in ``marks``."""
    new = stmt
    if isinstance(stmt, tirx.SeqStmt):
        seq = [_insert(s, marks) for s in stmt.seq]
        if any(not a.same_as(b) for a, b in zip(seq, stmt.seq)):
            new = tirx.SeqStmt(seq, stmt.span)
    elif isinstance(stmt, tirx.AttrStmt):
        body = _insert(stmt.body, marks)
        if not body.same_as(stmt.body):
            new = tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body, stmt.span)
    elif isinstance(stmt, tirx.For):
        body = _insert(stmt.body, marks)
        if not body.same_as(stmt.body):
            new = tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                           stmt.annotations, stmt.step, stmt.span)
    elif isinstance(stmt, tirx.IfThenElse):
        then = _insert(stmt.then_case, marks)
        other = None if stmt.else_case is None else _insert(stmt.else_case, marks)
        if not then.same_as(stmt.then_case) or (other is not None and not other.same_as(stmt.else_case)):
            new = tirx.IfThenElse(stmt.condition, then, other, stmt.span)
    elif isinstance(stmt, tirx.While):
        body = _insert(stmt.body, marks)
        if not body.same_as(stmt.body):
            new = tirx.While(stmt.condition, body, stmt.span)
    if stmt in marks:
        return tirx.SeqStmt([_barrier(), new])
    return new


def plan_shared_barriers(body: Any) -> Any:
    """``body`` (a GPU kernel's) with barriers before the statements that need them (module docstring)."""
    planner = _Planner()
    planner.visit(body)
    if not planner.marks:
        return body
    return _insert(body, planner.marks)


def PlanSharedBarriers() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """GPU functions: :func:`plan_shared_barriers` (run right before ``ThreadSync``)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        body = plan_shared_barriers(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.PlanSharedBarriers")
