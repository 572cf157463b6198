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
* **Atomic updates.** ``ThreadSync`` counts the pointer ``&S[i]`` of an atomic helper call
  (lowering/atomics.py) as a read of ``S``, so a ``T.copy`` of ``S`` after the atomics of a
  ``T.Parallel`` loop got no barrier. Here an atomic is a read and a write of its element (a load
  only a read, a store only a write), and two atomics never conflict.

:func:`PlanSharedBarriers` runs right before ``ThreadSync`` and places the barriers itself, with
the same model as ``ThreadSync`` (the statements of one sequence, a compound statement stands for
all its accesses, a barrier goes right before the statement that needs it, loop bodies are checked
once more against the next iteration; a loop body with a ``break``/``continue`` may end after any
statement, so all its accesses stay unordered for the code after the loop and for the next
iteration, which ``ThreadSync`` does not see) plus those two conflicts: a write after a write of the same
storage, and any read/write pair of one storage whose element sizes differ. Two accesses of one
element index, in the same dtype size, conflict nowhere only when that index uses every thread
index of the block (each thread touches its own element); ``ThreadSync`` checks the innermost one
only, this pass every ``threadIdx`` axis with more than one thread. All ``shared.dyn`` buffers
count as one storage (they share one allocation later), as in ``ThreadSync``.

**Which thread.** Indices and conditions are read with the values of ``Bind``/``LetStmt``
variables and of local scalars stored once with a value of the launch indices (``tx =
T.get_thread_binding()`` becomes ``tx[0] = threadIdx.x``), so ``S[tx]`` is ``S[threadIdx.x]``.
The conditions of the enclosing ``if``/``while`` statements may pin a thread axis to one value
(``tx == 0``, ``tx < 1``, nested ``if tx < 8:`` / ``if tx == 0:``, the ``else`` of ``tx != 0``;
TVM's analyzer decides): two accesses made under conditions that pin every axis of more than one
thread to the same values are made by one thread, in program order, and never conflict; an axis
pinned to the same value for both counts as used by their common index.

A barrier is placed only where every thread of the block reaches it: never inside an ``if`` or
``while`` whose condition is not marked ``T.tvm_thread_invariant`` or proven block-uniform, nor
inside a loop whose bounds depend on the thread (thread index, per-thread values, loads).

**Block-uniform ifs and whiles.** An ``if`` whose condition every thread of the block evaluates
alike (``_Planner._block_uniform``: the block index, scalar parameters, dynamic sizes, loop
variables of loops with uniform bounds, shared memory and global memory the kernel never writes,
local buffers every thread stores alike from such values (``thread_uniform.uniform_local_buffers``:
``k = 0`` ... ``k += 1``), at such indices; no thread index, per-thread local, ``let`` or impure
call; not under per-thread control flow nor in a loop with ``break``/``continue``) is walked like
straight-line code: barriers go inside it. A ``while`` on such a condition whose body has no
``break``/``continue`` too (``while k < n:``, ``while sched.valid():``), its body checked against
the next iteration like a ``for`` body, and for the code around it summarised like an ``if``
without ``else`` (it may run no iteration; ``ThreadSync`` does neither for a ``while``).
When it touches shared memory its condition is wrapped in ``T.tvm_thread_invariant`` under an
``AttrStmt`` :data:`UNIFORM_CONDITION`, so that ``ThreadSync`` accepts barriers inside it too, and
:func:`UnmarkUniformConditions` (after the last ``ThreadSync``) restores the condition as written.
``ThreadSync`` counts a barrier inside such an ``if`` as if the branch always ran; this pass
(``_Planner._uniform_summary``) counts it for the code around the ``if`` only when both branches
hold one, and otherwise places the barriers before/after the ``if`` that the path without a
barrier needs (``T.fill(S, 2)``, ``if n > 16:`` copy into ``S`` and read it, then a read of ``S``:
a barrier after the ``if``).

Where a barrier would be needed but cannot go:

* a read after a write (or a write after a read) of one element by two threads inside an ``if``
  on the thread index is the kernel's own race (``if tx < 32:`` and 32 threads writing and
  reading ``S2[i]``): a :class:`LoweringError` at the line of the access names the buffer, the
  ``if`` and what to do;
* a write after a write, a hazard inside a loop with per-thread bounds, or under a condition
  that does not use the thread index but is not block-uniform (a local variable, memory the kernel
  writes) is left as before (``ThreadSync`` refuses read/write hazards inside any unmarked ``if``).

Either way the missing barrier does not count as one for the code around it: every access inside
the ``if`` is still checked against the code before the ``if`` (a barrier before it) and after it
(a barrier after it). ``ThreadSync`` still runs afterwards: it counts these barriers and adds
none where they already order the accesses.

``ThreadSync`` itself knows nothing of the above: it compares ``S2[i]`` with ``S2[i]`` as two
threads' accesses and stops at "Cannot insert syncs inside condition" inside ``if tx == 0:``.
An outermost ``if``/``while`` (not under a loop with per-thread bounds) that reads and writes one
shared storage, and where this pass found no read/write hazard, gets a *same-thread sync* before
each of its statements that touch shared memory: ``tvm_storage_sync("shared", "tl.same_thread")``,
which ``ThreadSync`` counts as a barrier and :func:`DropSameThreadSyncs` removes right after it
(before ``ThreadSync("warp")``), so that nothing is printed. This pass orders the ``if`` against the
code around it with real barriers, as above.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.core import LOCAL_SCOPES
from ..language.spans import span_to_location
from ..language.tileops._common import collect, substitute, uses_var
from .thread_uniform import Ctx, has_exit, is_uniform, uniform_local_buffers
from .views import data_buffers, owner_of, with_owners

__all__ = ["PlanSharedBarriers", "plan_shared_barriers", "DropSameThreadSyncs", "SAME_THREAD",
           "UnmarkUniformConditions", "UNIFORM_CONDITION"]

_SHARED = "shared"
_DYN = "shared.dyn"
_SYNC_OP = "tirx.tvm_storage_sync"
_INVARIANT_OP = "tirx.tvm_thread_invariant"
_ACCESS_PTR_OP = "tirx.tvm_access_ptr"
_ADDRESS_OF_OP = "tirx.address_of"

#: Attribute around an ``if`` whose condition this pass marked ``T.tvm_thread_invariant`` (module docstring).
UNIFORM_CONDITION = "tl.uniform_condition"

#: Second argument of a same-thread sync: ``tvm_storage_sync("shared", SAME_THREAD)`` (module docstring).
SAME_THREAD = "tl.same_thread"


@dataclass
class _Access:
    kind: str  # "R" read, "W" write, "S" barrier, "C" barrier on some paths only (_uniform_summary)
    key: Any = None  # the data var, or _DYN for every shared.dyn buffer
    bits: int = 0  # size of the element the indices count
    points: Optional[tuple] = None  # the index expressions, None where a range
    threads: tuple = ()  # threadIdx vars of extent > 1 around the access
    pins: tuple = ()  # per thread var: the one value the enclosing conditions allow, else None
    name: str = ""  # the buffer, for messages
    where: Optional[tuple] = None  # (file, line) of the statement
    cond_where: Optional[tuple] = None  # (file, line[, tag]) of the innermost enclosing if/while of the kernel's
    # own when the access is under a condition on the thread index; tag "while" for a while loop, "generated"
    # for an if the pipeline made (a bounds guard, no line of its own)
    cut: bool = False  # made before the barrier a "C" stands for: ordered before everything after the "C"
    atomic: bool = False  # made by an atomic helper call (lowering/atomics.py): atomics need no barrier between them


def _barrier() -> Any:
    return tirx.Evaluate(tirx.call_intrin("int32", _SYNC_OP, tvm.ir.StringImm(_SHARED)))


def _same_thread_sync() -> Any:
    return tirx.Evaluate(tirx.call_intrin("int32", _SYNC_OP, tvm.ir.StringImm(_SHARED), tvm.ir.StringImm(SAME_THREAD)))


def _is_same_thread_sync(stmt: Any) -> bool:
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return (isinstance(call, tvm.ir.Call) and _op(call) == _SYNC_OP and len(call.args) == 2
            and isinstance(call.args[1], tvm.ir.StringImm) and call.args[1].value == SAME_THREAD)


def _op(call: Any) -> str:
    return getattr(call.op, "name", "")


def _bits(dtype: Any) -> int:
    d = tvm.runtime.DataType(str(dtype))
    return int(d.bits) * int(d.lanes)


def _buffer_of(data: Any) -> Any:
    """The buffer ``data`` (a buffer's ``.data``: ``buffer_data(B)``) belongs to, else ``data``."""
    return owner_of(data, data)


def _storage_name(data: Any) -> str:
    """The name of the buffer whose storage ``data`` is (a ``buffer_data(B)`` call in TVM 0.27,
    or a plain variable)."""
    owner = _buffer_of(data)
    return str(getattr(owner, "name", None) or owner)


def _has_load(expr: Any) -> bool:
    return bool(collect(expr, tvm.ir.TensorLoad))


def _same_key(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.same_as(b)


def _pin(access: _Access, var: Any) -> Optional[int]:
    for t, p in zip(access.threads, access.pins):
        if t.same_as(var):
            return p
    return None


def _conflict(prev: _Access, curr: _Access) -> bool:
    """Whether ``prev`` (earlier, no barrier since) and ``curr`` may touch one element from two threads."""
    if not _same_key(prev.key, curr.key):
        return False
    if prev.atomic and curr.atomic:  # two atomic updates of one element are ordered by the hardware
        return False
    # thread axes not pinned to one common value by the conditions around both accesses
    free = [t for t in curr.threads if _pin(curr, t) is None or _pin(curr, t) != _pin(prev, t)]
    if not free:  # one thread per block, or both accesses by the same single thread
        return False
    if prev.bits != curr.bits:  # views with another element size: indices count other units
        return True
    if prev.points is None or curr.points is None or len(prev.points) != len(curr.points):
        return True
    if not all(tvm_ffi.structural_equal(a, b) for a, b in zip(prev.points, curr.points)):
        return True
    # the same index expression: one element per thread only when it uses every free thread axis
    return not all(any(uses_var(p, t) for p in curr.points) for t in free)


def _addressed_data(body: Any) -> list:
    """The buffers and data variables that calls may write without a store: passed by address
    (``address_of``, ``tvm_access_ptr``, ``buffer_data`` as an argument) or to a call that is not pure."""
    out: list = []
    for call in collect(body, tvm.ir.Call):
        name = _op(call)
        if name in (_ADDRESS_OF_OP, _ACCESS_PTR_OP) or not _pure_call(call):
            for arg in call.args:
                out += collect(arg, tvm.ir.Var)
                out += [ld.source for ld in collect(arg, tvm.ir.TensorLoad)]
                out += data_buffers(arg)
    return out


def _launch_vars(body: Any) -> list:
    return [a.node.var for a in collect(body, tirx.AttrStmt) if a.attr_key == "thread_extent"]


def _single_store_locals(body: Any) -> list:
    """``[(buffer, indices, value)]``: local buffers stored exactly once, at constant indices,
    with a value of the launch indices and constants only (``tx[0] = threadIdx.x``), with no
    view and never passed by address. A load of one is that value wherever it is initialised."""
    launch = _launch_vars(body)
    stores: list = []  # [(buffer, [stores])]
    for st in collect(body, tirx.BufferStore):
        if str(st.buffer.scope()) in LOCAL_SCOPES:
            entry = next((e for e in stores if e[0].same_as(st.buffer)), None)
            if entry is None:
                stores.append((st.buffer, [st]))
            else:
                entry[1].append(st)
    excluded = [_buffer_of(d.data) for d in collect(body, tirx.DeclBuffer)]  # owners of views
    for call in collect(body, tvm.ir.Call):
        if _op(call) in (_ADDRESS_OF_OP, _ACCESS_PTR_OP) or not _op(call).startswith("tirx."):
            for arg in call.args:
                excluded += [ld.source for ld in collect(arg, tvm.ir.TensorLoad)]
                excluded += data_buffers(arg)
    out = []
    for buf, sts in stores:
        if len(sts) != 1 or any(buf.same_as(e) for e in excluded):
            continue
        st = sts[0]
        if not all(isinstance(i, tirx.IntImm) for i in st.indices) or collect(st.value, tvm.ir.TensorLoad):
            continue
        if all(any(v.same_as(w) for w in launch) for v in collect(st.value, tvm.ir.Var)):
            out.append((buf, tuple(int(i.value) for i in st.indices), st.value))
    return out


def _per_thread_launch_vars(body: Any) -> list:
    """The launch variables of ``body`` that differ between the threads of one block: every
    ``thread_extent`` variable but the block indices, unless its extent is 1."""
    out = []
    for attr in collect(body, tirx.AttrStmt):
        if attr.attr_key != "thread_extent" or str(attr.node.thread_tag).startswith("blockIdx"):
            continue
        if not (isinstance(attr.value, tirx.IntImm) and int(attr.value.value) == 1):
            out.append(attr.node.var)
    return out


def _written_data(body: Any) -> list:
    """What ``body`` may write: the buffers (``_buffer_of`` their data: views lead to their owner)
    of stores and of ``tvm_access_ptr`` with the write flag, and every buffer and variable passed
    to a call that is not pure (atomics, externs, ``address_of``)."""
    out = [_buffer_of(st.buffer.data) for st in collect(body, tirx.BufferStore)]
    for call in collect(body, tvm.ir.Call):
        if _op(call) == _ACCESS_PTR_OP:
            flag = call.args[4]
            if not (isinstance(flag, tirx.IntImm) and not int(flag.value) & 2):
                out.append(_buffer_of(call.args[1]))
                out += collect(call.args[1], tvm.ir.Var)
        elif not _pure_call(call) or _op(call) == _ADDRESS_OF_OP:
            for arg in call.args:
                out += collect(arg, tvm.ir.Var)
                out += [_buffer_of(ld.source.data) for ld in collect(arg, tvm.ir.TensorLoad)]
                out += data_buffers(arg)
    return with_owners(out, [(d.buffer, _buffer_of(d.data)) for d in collect(body, tirx.DeclBuffer)])


#: Parts of pure intrinsic names whose value may still differ between threads (lane masks, thread
#: ranks) or that call code this pass cannot read (externs, LLVM intrinsics, PTX).
_THREAD_STATE_NAMES = ("extern", "llvm", "lane", "thread_rank", "ptx", "warp", "shfl")


def _pure_call(call: Any) -> bool:
    """Whether ``call``'s value depends on its arguments only (TVM's effect kind: pure or annotation),
    leaving out intrinsics that read per-thread state."""
    name = _op(call)
    if name == _INVARIANT_OP or name.endswith("if_then_else"):
        return True
    if not isinstance(call.op, tvm.ir.Op) or any(part in name for part in _THREAD_STATE_NAMES):
        return False
    try:
        kind = int(call.op.get_attr("TCallEffectKind"))
    except Exception:  # noqa: BLE001 - an operator without an effect kind: not known to be pure
        return False
    return kind in (0, 1)  # kExprAnnotation, kPure


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
        self.extents: list = []  # (thread var, static extent or None) of the threads in scope
        self.locals: list = []  # (buffer, indices, value): see _single_store_locals
        self.conds: list = []  # enclosing if/while conditions on the thread: (condition, (file, line[, tag]))
        self.sites: list = []  # (file, line[, tag]) of every enclosing divergent if/while (for messages)
        self.pins: tuple = ()  # per var of self.threads: the value self.conds allow, else None
        self.where: Optional[tuple] = None  # (file, line) of the innermost statement with a span
        self.races: list = []  # (prev, curr): read/write hazards between threads inside an if on the thread
        self.region: Optional[dict] = None  # the outermost divergent if/while being walked (same-thread syncs)
        self.quiet: dict = {}  # stmt -> True: a same-thread sync right before it
        self.uniform: dict = {}  # if -> True: its condition is marked block-uniform for ThreadSync
        self.per_thread: list = []  # launch vars that differ between the threads of a block
        self.written: list = []  # data vars of the buffers the kernel writes (loads of them may differ)
        self.exits = 0  # nesting depth of loops whose body holds a break or continue
        self.uniform_locals: tuple = ()  # local buffers holding the same values in every thread

    def _key(self, data: Any, scope: str) -> Any:
        """What identifies the storage behind ``data``: the allocated buffer (views lead to it),
        or _DYN for every shared.dyn buffer; None outside shared memory."""
        if scope == _DYN:
            return _DYN
        if scope != _SHARED:
            return None
        return self._root(data)

    def _root(self, data: Any) -> Any:
        """The buffer that owns the storage ``data`` names, through the views declared so far."""
        buf = _buffer_of(data)
        return self.views.get(buf, buf)

    # -- expressions --------------------------------------------------------------------
    def _subst(self, expr: Any) -> Any:
        expr = substitute(expr, self.binds[::-1])  # the innermost binding of a variable first
        if not self.locals:
            return expr

        def on_load(load: Any) -> Any:
            for buf, indices, value in self.locals:
                if load.source.same_as(buf) and len(load.indices) == len(indices) and all(
                        isinstance(i, tirx.IntImm) and int(i.value) == j for i, j in zip(load.indices, indices)):
                    return value
            return load

        return tvm_ffi.structural_map(expr, [(tvm.ir.TensorLoad, on_load)])

    def _new(self, kind: str, key: Any, bits: int, points: Optional[tuple], name: str) -> _Access:
        cond_where = self.conds[-1][1] if self.conds else None
        if cond_where is not None:  # for the message: the innermost if/while of the kernel's own
            cond_where = next((w for w in reversed(self.sites) if w and w[2:] != ("generated",)), cond_where)
        return _Access(kind, key, bits, points, tuple(self.threads), self.pins, name, self.where, cond_where)

    def _uses_thread(self, expr: Any) -> bool:
        return any(uses_var(expr, t) for t in self.threads)

    def _pins_of(self, conds: list) -> tuple:
        """Per var of ``self.threads``: the one value ``conds`` allow it (TVM's analyzer), else None."""
        analyzer = tvm.sym.Analyzer()
        for var, extent in self.extents:
            if extent is not None:
                analyzer.bind(var, tvm.ir.Range(0, extent))
        with contextlib.ExitStack() as stack:
            for cond in conds:
                stack.enter_context(analyzer.constraint_scope(analyzer.simplify(cond)))
            pins = []
            for var in self.threads:
                bound = analyzer.const_int_bound(var)
                pins.append(int(bound.min_value) if bound.min_value == bound.max_value else None)
        return tuple(pins)

    def _enter_cond(self, cond: Any, where: Any) -> tuple:
        """Push an if/while condition (substituted) when it uses a thread index; the old state."""
        saved = (len(self.conds), self.pins, len(self.sites))
        self.sites.append(where)
        cond = self._subst(cond)
        if self._uses_thread(cond):
            self.conds.append((cond, where))
            self.pins = self._pins_of([c for c, _ in self.conds])
        return saved

    def _leave_cond(self, saved: tuple) -> None:
        del self.conds[saved[0]:]
        self.pins = saved[1]
        del self.sites[saved[2]:]

    def _points(self, indices: Any) -> Optional[tuple]:
        out = []
        for index in indices:
            if "x" in str(index.ty):  # a vector of indices (Ramp, Broadcast): a range
                return None
            out.append(self._subst(index))
        return tuple(out)

    def _atomic_accesses(self, call: Any, seen: list) -> list:
        """The accesses of an atomic helper call ``tl_atomic_<op>_<dtype>_<order>(ptr, ...)``
        (lowering/atomics.py) to its destination: a read and a write (a load only reads, a store
        only writes), marked atomic. ThreadSync counts ``address_of(S[i])`` as a read of ``S``
        only, so the reads after a block's atomic updates of a shared tile got no barrier.
        ``seen`` gets the pointer expression, whose own load is not counted again."""
        ptr = call.args[1]
        op = str(call.args[0].value).split("_")[2]
        if isinstance(ptr, tvm.ir.Call) and _op(ptr) == _ADDRESS_OF_OP and isinstance(ptr.args[0], tvm.ir.TensorLoad):
            load = ptr.args[0]
            src = load.source
            key, bits, points, name = self._key(src.data, str(src.scope())), _bits(src.dtype), self._points(load.indices), str(src.name)
            seen.append(load)
        elif isinstance(ptr, tvm.ir.Call) and _op(ptr) == _ACCESS_PTR_OP:
            var = ptr.args[1]
            key = self._key(var, str(getattr(var.ty, "storage_scope", "") or ""))
            bits, points, name = _bits(ptr.args[0].ty), None, _storage_name(var)
            seen.append(ptr)
        else:
            return []
        if key is None:
            return []
        kinds = {"load": "R", "store": "W"}.get(op, "RW")
        return [replace(self._new(k, key, bits, points, name), atomic=True) for k in kinds]

    def _expr_accesses(self, expr: Any) -> list:
        found: list = []
        seen: list = []  # pointers of atomic calls, counted by _atomic_accesses

        def on_node(node: Any) -> None:
            if any(node.same_as(x) for x in seen):
                return
            if isinstance(node, tvm.ir.TensorLoad):
                src = node.source
                key = self._key(src.data, str(src.scope()))
                if key is not None:
                    found.append(self._new("R", key, _bits(src.dtype), self._points(node.indices), str(src.name)))
            elif isinstance(node, tvm.ir.Call):
                name = _op(node)
                if (name == "tirx.call_extern" and isinstance(node.args[0], tvm.ir.StringImm)
                        and str(node.args[0].value).startswith("tl_atomic_") and len(node.args) > 1):
                    found.extend(self._atomic_accesses(node, seen))
                elif name == _SYNC_OP and str(node.args[0].value) != "warp":
                    found.append(_Access("S"))
                elif name == _ACCESS_PTR_OP:
                    var = node.args[1]
                    scope = str(getattr(var.ty, "storage_scope", "") or "")
                    key = self._key(var, scope)
                    flag = node.args[4]
                    if key is not None and isinstance(flag, tirx.IntImm):
                        bits = _bits(node.args[0].ty)
                        if int(flag.value) & 1:
                            found.append(self._new("R", key, bits, None, _storage_name(var)))
                        if int(flag.value) & 2:
                            found.append(self._new("W", key, bits, None, _storage_name(var)))

        tvm_ffi.structural_walk(expr, ((tvm.ir.TensorLoad, tvm.ir.Call), on_node), order="pre")
        return found

    def _thread_dependent(self, expr: Any) -> bool:
        expr = self._subst(expr)
        return _has_load(expr) or any(uses_var(expr, t) for t in self.threads)

    def _block_uniform(self, cond: Any) -> bool:
        """Whether every thread of the block evaluates ``cond`` (an ``if`` condition, not marked
        ``T.tvm_thread_invariant``) to the same value, so a barrier may go inside the ``if``.

        Proven conservatively: not under per-thread control flow nor in a loop with ``break`` /
        ``continue``; after substituting bound variables and the launch-index locals, no thread
        index of more than one thread, no ``let``, only pure calls (``_pure_call``), and loads only
        of shared memory (barriers order it, so all threads read one value) or of global memory the
        kernel never writes, at indices that are themselves uniform; no load of local memory."""
        if self.exits:
            return False
        ctx = Ctx(divergent=bool(self.divergent), per_thread=tuple(self.per_thread), uniform_locals=self.uniform_locals)
        return is_uniform(self._subst(cond), ctx, _pure_call, self._uniform_load)

    def _uniform_load(self, load: Any) -> bool:
        """Whether every thread of the block reads one value by ``load`` (at uniform indices), for
        memory other than ``local`` buffers (``is_uniform`` checks those against the uniform
        locals): shared memory (barriers order it), or global memory the kernel never writes."""
        scope = str(load.source.scope())
        if scope in (_SHARED, _DYN):
            return True
        owner = self._root(load.source.data)
        return scope == "global" and not any(w.same_as(x) for w in self.written
                                             for x in (owner, load.source, load.source.data))

    # -- statements ---------------------------------------------------------------------
    def _record(self, stmt: Any, accesses: list, always: bool = False) -> None:
        if self.in_device and (accesses or always):
            self.scopes[-1].append((stmt, accesses))
            if self.region is not None and any(a.kind in "RW" for a in accesses):
                self.region["stmts"].append((stmt, accesses))

    def visit(self, stmt: Any) -> None:
        where = self.where
        here = span_to_location(getattr(stmt, "span", None))
        if here is not None:
            self.where = here
        self._visit(stmt)
        self.where = where

    def _visit(self, stmt: Any) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.visit(s)
        elif isinstance(stmt, tirx.BufferStore):
            acc = []
            key = self._key(stmt.buffer.data, str(stmt.buffer.scope()))
            if key is not None:
                acc.append(self._new("W", key, _bits(stmt.buffer.dtype), self._points(stmt.indices), str(stmt.buffer.name)))
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
            if not _buffer_of(stmt.data).same_as(stmt.buffer):
                self.views[stmt.buffer] = self._root(stmt.data)
        # AllocBuffer, Break, Continue, ...: no accesses

    def _visit_attr(self, stmt: Any) -> None:
        if stmt.attr_key != "thread_extent":
            self.visit(stmt.body)
            return
        iv = stmt.node
        extent = stmt.value
        counted = str(iv.thread_tag).startswith("threadIdx") and not (
            isinstance(extent, tirx.IntImm) and int(extent.value) == 1)
        self.extents.append((iv.var, int(extent.value) if isinstance(extent, tirx.IntImm) else None))
        if counted:
            self.threads.append(iv.var)
            self.pins = self.pins + (None,)
        if not self.in_device:
            self.in_device = True
            self.locals = _single_store_locals(stmt)
            self.per_thread = _per_thread_launch_vars(stmt)
            self.written = _written_data(stmt)
            self.uniform_locals = uniform_local_buffers(stmt, _pure_call, tuple(self.per_thread), self._uniform_load,
                                                        tuple(_addressed_data(stmt)))
            self.scopes.append([])
            self.visit(stmt.body)
            self._summarize(self.scopes.pop(), None)
            self.in_device = False
        else:
            self.visit(stmt.body)
        if counted:
            self.threads.pop()
            self.pins = self.pins[:-1]
        self.extents.pop()

    def _scoped(self, body: Any, divergent: bool, loop: Any = None, leaves: bool = False) -> list:
        self.divergent += divergent
        self.scopes.append([])
        nbinds = len(self.binds)
        self.visit(body)
        del self.binds[nbinds:]
        out = self._summarize(self.scopes.pop(), loop, leaves)
        self.divergent -= divergent
        return out

    def _visit_for(self, stmt: Any) -> None:
        if not self.in_device:
            self.visit(stmt.body)
            return
        divergent = self._thread_dependent(stmt.min) or self._thread_dependent(stmt.extent)
        exits = has_exit(stmt.body)
        self.exits += exits
        acc = self._scoped(stmt.body, divergent, loop=stmt, leaves=exits)
        self.exits -= exits
        one = isinstance(stmt.extent, tirx.IntImm) and int(stmt.extent.value) == 1
        for a in acc:
            if a.points is not None and any(uses_var(p, stmt.loop_var) for p in a.points):
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
        marked = isinstance(cond, tvm.ir.Call) and _op(cond) == _INVARIANT_OP
        uniform = not marked and self._block_uniform(cond)
        divergent = not (marked or uniform)
        region = self._enter_region(divergent)
        own = span_to_location(getattr(stmt, "span", None))
        # an if the pipeline made (a bounds guard) has no line of its own: tagged, so that a race
        # message names the kernel's own if or while around it instead (_new)
        where = own or ((*self.where, "generated") if self.where else None)
        saved = self._enter_cond(cond, where) if divergent else None
        branches = [self._scoped(stmt.then_case, divergent)]
        if saved is not None:
            self._leave_cond(saved)
        if stmt.else_case is not None:
            saved = self._enter_cond(tirx.Not(cond), where) if divergent else None
            branches.append(self._scoped(stmt.else_case, divergent))
            if saved is not None:
                self._leave_cond(saved)
        self._leave_region(region)
        acc = self._uniform_summary(stmt, branches) if uniform else [a for b in branches for a in b]
        self._record(stmt, acc, always=True)

    def _visit_while(self, stmt: Any) -> None:
        if not self.in_device:
            self.visit(stmt.body)
            return
        cond = stmt.condition
        marked = isinstance(cond, tvm.ir.Call) and _op(cond) == _INVARIANT_OP
        exits = has_exit(stmt.body)
        uniform = not marked and not exits and self._block_uniform(cond)
        divergent = not (marked or uniform)
        region = self._enter_region(divergent)
        where = span_to_location(getattr(stmt, "span", None)) or self.where
        saved = self._enter_cond(cond, (*where, "while") if where else None) if divergent else None
        self.exits += exits
        acc = self._scoped(stmt.body, divergent, loop=None if divergent else stmt, leaves=exits)
        self.exits -= exits
        if saved is not None:
            self._leave_cond(saved)
        self._leave_region(region)
        if uniform:  # may run no iteration: as an if without else around the body
            acc = self._uniform_summary(stmt, [acc])
        self._record(stmt, acc, always=True)

    def _uniform_summary(self, stmt: Any, branches: list) -> list:
        """The accesses of a block-uniform ``if`` (the summaries of its branches) for the code
        around it; the ``if`` is marked for ``ThreadSync`` when it touches shared memory.

        Where every path through it passes a barrier (both branches hold one) it is a barrier as
        ``ThreadSync`` counts it. Otherwise a path without one (no ``else``, or a branch without a
        barrier) leaves the accesses before the ``if`` unordered against those after it, which
        ``ThreadSync`` misses (it counts a barrier inside an invariant ``if`` as if it always ran):
        the accesses of the branches without a barrier, then those before the barrier of the
        others (``cut``), a ``"C"``, then those after their barrier. :meth:`_needs_sync` checks the
        code before the ``if`` against the accesses up to the ``"C"``; after the ``if`` the
        accesses before it stay, with those of the branches without a barrier and those after
        the others' barriers (:meth:`_summarize`)."""
        if any(acc for acc in branches):
            self.uniform[stmt] = True
        plain: list = []
        heads: list = []
        tails: list = []
        for acc in branches:
            syncs = [k for k, a in enumerate(acc) if a.kind == "S"]
            if syncs:
                heads += acc[:syncs[0]]
                tails += acc[syncs[-1] + 1:]
            else:
                plain += acc
        synced = [any(a.kind == "S" for a in acc) for acc in branches]
        if len(branches) == 2 and all(synced):  # a barrier on every path
            return heads + [_Access("S")] + tails
        if not any(synced):
            return plain
        return plain + [replace(a, cut=True) for a in heads] + [_Access("C")] + tails

    def _enter_region(self, divergent: bool) -> bool:
        """Start an outermost divergent if/while (not under per-thread control flow)."""
        if not divergent or self.divergent or self.region is not None:
            return False
        self.region = {"stmts": [], "rw_hazard": False}
        return True

    def _leave_region(self, started: bool) -> None:
        """End a region: same-thread syncs before its statements where ThreadSync may ask for a
        barrier (a read and a write of one storage) and this pass found no read/write hazard."""
        if not started:
            return
        region, self.region = self.region, None
        if region["rw_hazard"]:
            return
        accesses = [a for _, acc in region["stmts"] for a in acc]
        reads = [a.key for a in accesses if a.kind == "R"]
        if any(a.kind == "W" and any(_same_key(a.key, k) for k in reads) for a in accesses):
            for stmt, _ in region["stmts"]:
                self.quiet[stmt] = True

    # -- planning (ThreadSync's Summarize, with the extra conflicts) -----------------------
    def _mark(self, stmt: Any, pair: Optional[tuple] = None) -> None:
        """A barrier right before ``stmt``, for the hazard ``pair`` (prev, curr access)."""
        if not self.divergent:
            self.marks[stmt] = True
            return
        self.missed.append(stmt)
        if pair is not None and pair[0].kind != pair[1].kind:  # a read and a write
            if self.region is not None:
                self.region["rw_hazard"] = True
            if pair[0].cond_where is not None or pair[1].cond_where is not None:  # under an if on the thread
                self.races.append(pair)

    def _needs_sync(self, acc: list, reads: list, writes: list) -> Optional[tuple]:
        """The hazard (prev, curr) that needs a barrier before the statement of ``acc``: a
        read/write pair first, else a write after a write; None when there is none."""
        ww = None
        for a in acc:
            if a.kind == "C":  # what follows is ordered by a barrier inside a uniform if
                return ww
            if a.kind == "S":
                if ww is not None:
                    return ww
                reads.clear()
                writes.clear()
            elif a.kind == "R":
                prev = next((w for w in writes if _conflict(w, a)), None)
                if prev is not None:
                    return prev, a
            elif a.kind == "W":
                prev = next((r for r in reads if _conflict(r, a)), None)
                if prev is not None:
                    return prev, a
                if ww is None:
                    prev = next((w for w in writes if _conflict(w, a)), None)
                    ww = None if prev is None else (prev, a)
        return ww

    def _summarize(self, seq: list, loop: Any, leaves: bool = False) -> list:
        """The accesses of the statement sequence ``seq`` for the code around it (barriers
        marked where it needs them; ``loop``: the loop whose body it is, checked against its next
        iteration). ``leaves``: the loop body holds a ``break``/``continue``, so the loop may end,
        or go on to the next iteration, after any statement: every access stays unordered for the
        code after the loop and for the next iteration (:meth:`_leaving_summary`)."""
        reads: list = []
        writes: list = []
        synced = set()
        for i, (stmt, acc) in enumerate(seq):
            pair = None if stmt in self.marks else self._needs_sync(acc, reads, writes)
            if stmt in self.marks or pair is not None:
                reads.clear()
                writes.clear()
                if stmt not in self.marks:
                    self._mark(stmt, pair)
                if stmt in self.marks:  # placed: a barrier where every thread passes
                    synced.add(i)
            for a in acc:
                if a.kind == "R":
                    reads.append(a)
                elif a.kind == "W":
                    writes.append(a)
                elif a.kind == "C":  # the accesses before its barrier are ordered before what follows
                    cut = [b for b in acc if b.cut]
                    reads[:] = [r for r in reads if not any(r is b for b in cut)]
                    writes[:] = [w for w in writes if not any(w is b for b in cut)]
                else:
                    reads.clear()
                    writes.clear()
        if leaves:  # a continue may skip the barriers after it
            reads[:] = [a for _, acc in seq for a in acc if a.kind == "R"]
            writes[:] = [a for _, acc in seq for a in acc if a.kind == "W"]
        if loop is not None:  # the next iteration against what this one left unsynchronised
            for i, (stmt, acc) in enumerate(seq):
                if i in synced or not (reads or writes):
                    break
                pair = self._needs_sync(acc, reads, writes)
                if pair is not None:
                    self._mark(stmt, pair)
                    if stmt in self.marks:
                        synced.add(i)
                    break
        if leaves:
            return self._leaving_summary(seq, synced)
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
                elif a.kind != "C":  # outside its statement, a "C" counts as no barrier
                    (tail if count else head).append(replace(a, cut=False))
        return head + tail

    @staticmethod
    def _leaving_summary(seq: list, synced: set) -> list:
        """The summary of a loop body with a ``break``/``continue``: the accesses before its first
        barrier (the code before the loop is checked against them), a ``"C"``, then every access
        after that barrier (a ``break`` may leave the loop right after any of them: all stay
        unordered for the code after the loop; the ``"C"`` keeps them from being checked
        against the code before it, which the first barrier orders)."""
        head: list = []
        rest: list = []
        seen = False
        for i, (_, acc) in enumerate(seq):
            seen = seen or i in synced
            for a in acc:
                if a.kind == "S":
                    seen = True
                elif a.kind in ("R", "W"):
                    (rest if seen else head).append(replace(a, cut=False))
        return head + ([_Access("C")] + rest if seen else [])


def _insert(stmt: Any, marks: dict, quiet: dict, uniform: dict) -> Any:
    """``stmt`` with a barrier right before every statement in ``marks``, a same-thread sync
    before every one in ``quiet``, and the condition of every ``if`` in ``uniform`` marked
    (:func:`_mark_uniform`)."""
    new = stmt
    if isinstance(stmt, tirx.SeqStmt):
        seq = [_insert(s, marks, quiet, uniform) for s in stmt.seq]
        if any(not a.same_as(b) for a, b in zip(seq, stmt.seq)):
            new = tirx.SeqStmt(seq, stmt.span)
    elif isinstance(stmt, tirx.AttrStmt):
        body = _insert(stmt.body, marks, quiet, uniform)
        if not body.same_as(stmt.body):
            new = tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body, stmt.span)
    elif isinstance(stmt, tirx.For):
        body = _insert(stmt.body, marks, quiet, uniform)
        if not body.same_as(stmt.body):
            new = tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                           stmt.annotations, stmt.step, stmt.span)
    elif isinstance(stmt, tirx.IfThenElse):
        then = _insert(stmt.then_case, marks, quiet, uniform)
        other = None if stmt.else_case is None else _insert(stmt.else_case, marks, quiet, uniform)
        if not then.same_as(stmt.then_case) or (other is not None and not other.same_as(stmt.else_case)):
            new = tirx.IfThenElse(stmt.condition, then, other, stmt.span)
    elif isinstance(stmt, tirx.While):
        body = _insert(stmt.body, marks, quiet, uniform)
        if not body.same_as(stmt.body):
            new = tirx.While(stmt.condition, body, stmt.span)
    if stmt in uniform:
        new = _mark_uniform(new)
    if stmt in marks:
        return tirx.SeqStmt([_barrier(), new])
    if stmt in quiet:
        return tirx.SeqStmt([_same_thread_sync(), new])
    return new


def _mark_uniform(stmt: Any) -> Any:
    """An ``if`` or ``while`` with its condition wrapped in ``T.tvm_thread_invariant`` (ThreadSync
    then places barriers inside it), under an ``AttrStmt`` :data:`UNIFORM_CONDITION` so that
    :func:`UnmarkUniformConditions` restores the condition after ``ThreadSync``."""
    cond = tirx.call_intrin("bool", _INVARIANT_OP, stmt.condition)
    if isinstance(stmt, tirx.While):
        new = tirx.While(cond, stmt.body, stmt.span)
    else:
        new = tirx.IfThenElse(cond, stmt.then_case, stmt.else_case, stmt.span)
    return tirx.AttrStmt(tvm.ir.StringImm(""), UNIFORM_CONDITION, tirx.IntImm("int32", 1), new, stmt.span)


def _race_message(prev: _Access, curr: _Access, location: str) -> str:
    def at(where: Optional[tuple]) -> str:
        return f"{where[0]}:{where[1]}" if where else location

    def line(where: Optional[tuple]) -> str:
        return f"line {where[1]}" if where else "an earlier line"

    cond = curr.cond_where or prev.cond_where
    first, second = ("written", "read") if prev.kind == "W" else ("read", "written")
    if cond is not None and cond[2:] == ("while",):
        inside, that = f"the while loop at {line(cond)}, whose condition may differ between threads", "that loop"
    else:
        inside, that = f"the if on the thread index at {line(cond)}", "that if"
    return (
        f"{at(curr.where)}: shared buffer '{curr.name}' is {second} here and {first} at {line(prev.where)} by "
        f"different threads inside {inside}; they race on its elements: "
        f"a __syncthreads() between them cannot go inside {that} (not every thread of the block reaches "
        "it). Let a single thread do this work (e.g. `if tx == 0:`), index the buffer by the thread "
        "index so that each thread touches only its own elements, or split the if in two (or move "
        "the work out of the condition) so that the barrier goes between the write and the read"
    )


def plan_shared_barriers(body: Any, location: str = "<unknown>") -> Any:
    """``body`` (a GPU kernel's) with barriers before the statements that need them, and
    same-thread syncs where ``ThreadSync`` must not ask for one (module docstring).

    :raises LoweringError: two threads read and write one element of a shared buffer inside an
        ``if`` on the thread index (``location``: the kernel's, for accesses without a line).
    """
    planner = _Planner()
    planner.visit(body)
    if planner.races:
        raise LoweringError(_race_message(*planner.races[0], location))
    if not planner.marks and not planner.quiet and not planner.uniform:
        return body
    return _insert(body, planner.marks, planner.quiet, planner.uniform)


def PlanSharedBarriers() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """GPU functions: :func:`plan_shared_barriers` (run right before ``ThreadSync``)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        attrs = func.attrs if func.attrs is not None else {}
        body = plan_shared_barriers(func.body, str(attrs.get("tl.source_location", "")) or "<unknown>")
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.PlanSharedBarriers")


def drop_same_thread_syncs(body: Any) -> Any:
    """``body`` without the same-thread syncs :func:`plan_shared_barriers` placed."""

    def on_seq(seq: Any) -> Any:
        kept = [s for s in seq.seq if not _is_same_thread_sync(s)]
        if len(kept) == len(seq.seq):
            return seq
        if not kept:
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept, seq.span)

    return tvm_ffi.structural_map(body, [(tirx.SeqStmt, on_seq)])


def DropSameThreadSyncs() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """GPU functions, right after ``ThreadSync("shared")``/``("shared.dyn")``: remove the
    same-thread syncs (they order nothing and print nothing)."""

    def transform(func, mod, ctx):  # noqa: ARG001
        body = drop_same_thread_syncs(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.DropSameThreadSyncs")


def unmark_uniform_conditions(body: Any) -> Any:
    """``body`` with the conditions :func:`plan_shared_barriers` marked block-uniform as they were."""

    def unmarked(stmt: Any) -> Any:
        cond = stmt.condition if isinstance(stmt, (tirx.IfThenElse, tirx.While)) else None
        if not (isinstance(cond, tvm.ir.Call) and _op(cond) == _INVARIANT_OP):
            return stmt
        if isinstance(stmt, tirx.While):
            return tirx.While(cond.args[0], stmt.body, stmt.span)
        return tirx.IfThenElse(cond.args[0], stmt.then_case, stmt.else_case, stmt.span)

    def on_attr(attr: Any) -> Any:
        if attr.attr_key != UNIFORM_CONDITION:
            return attr
        inner = attr.body
        if isinstance(inner, tirx.SeqStmt):  # ThreadSync put a barrier right before the if
            return tirx.SeqStmt([unmarked(s) for s in inner.seq], inner.span)
        return unmarked(inner)

    return tvm_ffi.structural_map(body, [(tirx.AttrStmt, on_attr)])


def UnmarkUniformConditions() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """GPU functions, after the last ``ThreadSync``: the ``if`` conditions
    :func:`plan_shared_barriers` wrapped in ``T.tvm_thread_invariant`` for it are printed as written."""

    def transform(func, mod, ctx):  # noqa: ARG001
        body = unmark_uniform_conditions(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.UnmarkUniformConditions")
