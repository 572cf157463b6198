"""A kernel's accesses of global memory never leave their tensor.

A kernel may touch a whole tile element by element where the tile crosses the edge of a tensor
(``C[m0 + i, n0 + j] = acc[i, j]`` with ``N`` not a multiple of ``block_N``, ``x = A[bx * 32 + j]``
in a serial loop of the last block, ``T.atomic_add(H[idx[i]], 1)`` with an index read from
memory). TileLang guards such accesses, so kernels written for it rely on that; on a CPU target an
unguarded store there corrupts the heap and an unguarded load reads another allocation.
:func:`guard_global_accesses` rewrites the body of one ``T.Kernel`` so that every access of a
``global``-scope buffer (a tensor parameter, ``T.alloc_global``) whose indices are not known to
lie inside the buffer is guarded by ``0 <= index < dim and ...``:

* a store (``BufferStore``) becomes ``if cond: store`` and is skipped outside the buffer, as
  ``T.copy`` skips the parts of a tile outside its destination (docs/tile-operators.md);
* a load gives 0 outside the buffer (``T.if_then_else(cond, A[i], 0)``), or the value
  ``T.annotate_safe_value`` set for that buffer in the enclosing scope;
* an atomic operation (``T.atomic_add`` and the other atomic markers, ``return_prev=`` included)
  is skipped outside the buffer and its value is then 0; the multi-lane forms
  (``T.atomic_addx2``/``x4``) need all of their lanes inside the buffer.

A condition is not added where TVM's analyzer proves it: from the ranges of the ``T.Kernel``
block indices and of the loops around the access, from the conditions of the enclosing ``if``
statements and ``T.if_then_else`` branches (the guards the tile operators already emit), so
kernels whose tiles divide static shapes keep their guard-free loops. The values of per-thread
scalars (``i = bx * 64 + j``) and the ranges of ``T.get_thread_binding`` take part in the proofs,
and so does ``T.assume(cond)``: the kernel's promise holds for the statements after it in its
block, up to the first one that writes a buffer the condition reads (``x = T.alloc_var(...)``,
``x = l``, ``T.assume(0 <= x and x < N)``: ``A[x]`` is not guarded).
On CPU targets a loop nest without inner loops whose guards are affine in its variables is
versioned: ``if <the guards hold at the weakest corner of the iteration box>: <the nest without
them> else: <the guarded nest>``, so only the tiles that cross an edge pay for the guards (and
LLVM vectorizes the others; ``bench/access_guards.py``). Vector accesses (``Ramp`` indices) come
from the operators, which guard themselves, and addresses taken with ``T.address_of`` /
``T.access_ptr`` (for extern calls) are the caller's responsibility. ``tl.disable_safe_memory_legalize``
turns the guards off (lowering/configs.py). On CPU targets (``on_chip``) the kernel's tiles
(shared, fragment and local buffers, not ``T.alloc_var`` scalars) are guarded the same way: an
index outside a tile there wrote over the process's stack or heap, or killed it (SIGSEGV).
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Iterator, Optional, Sequence

import tvm
import tvm_ffi
from tvm import tirx

from ..language.registered_ops import ADDRESS_OPS
from ..language.tileops._common import all_of, cast, collect, is_var_buffer, scope_of, static_int, substitute
from . import atomics
from .intrinsics import parse as parse_intrinsic
from .markers import extern_name, parallel_loops, parallel_ndim, safe_value_marker

__all__ = ["guard_global_accesses"]

_PLACEHOLDER = "tl_access_guard_placeholder_"


def _is_global(buffer: Any) -> bool:
    return scope_of(buffer) == "global"


def _assumption(stmt: Any) -> Optional[Any]:
    """The condition of a ``T.assume(cond)`` statement, else None."""
    value = getattr(stmt, "value", None) if isinstance(stmt, tirx.Evaluate) else None
    if isinstance(value, tvm.ir.Call) and _op_name(value) == "tirx.assume" and len(value.args) == 1:
        return value.args[0]
    return None


def _op_name(call: Any) -> str:
    op = getattr(call, "op", None)
    return str(getattr(op, "name", "")) if op is not None else ""


def _narrow(expr: Any) -> Any:
    """``expr`` without widening integer casts (``int64(i)`` of an int32 ``i``): they keep order,
    and TVM's analyzer does not carry a symbolic bound (``i < m``) through them."""
    while type(expr).__name__ == "Cast" and str(expr.ty.dtype).startswith("int"):
        inner = expr.value
        if not str(inner.ty.dtype).startswith("int"):
            break
        if int(str(inner.ty.dtype)[3:] or 32) > int(str(expr.ty.dtype)[3:] or 32):
            break
        expr = inner
    return expr


def _loads(expr: Any) -> list:
    return collect(expr, tvm.ir.TensorLoad)


def _reads_memory(expr: Any) -> bool:
    """Whether ``expr`` reads an array (not only ``T.alloc_var`` scalars)."""
    return any(not is_var_buffer(load.source) for load in _loads(expr))


def _address_taken(node: Any) -> list:
    """The buffers whose address ``node`` passes on (``T.address_of(x[0])``, ``T.access_ptr``)."""
    return [load.source for call in collect(node, tvm.ir.Call) if _op_name(call) in ADDRESS_OPS
            for load in _loads(call)]


def _stored_buffers(stmt: Any) -> list:
    """The buffers ``stmt`` may write (a conservative list: every ``BufferStore``'s, and every
    buffer whose address it takes, atomics included)."""
    return [store.buffer for store in collect(stmt, tirx.BufferStore)] + _address_taken(stmt)


def _divides_by_variable(expr: Any) -> bool:
    return any(not static_int(node.b) for node in collect(expr, (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)))


def _contains_loops(stmt: Any) -> bool:
    return bool(collect(stmt, (tirx.For, tirx.While)))


def _defined_vars(stmt: Any) -> list:
    """The variables ``stmt`` defines: bound scalars and the buffers it allocates (``T.alloc_var``,
    ``T.alloc_local``, ... in a loop body)."""
    return [bind.var for bind in collect(stmt, (tirx.Bind, tirx.LetStmt))] + [
        alloc.buffer for alloc in collect(stmt, (tirx.AllocBuffer, tirx.DeclBuffer))]


def _fresh_copy(stmt: Any, defined: list) -> Any:
    """``stmt`` with the variables it defines (``defined``) replaced by new ones of the same name
    and type: the versioned copy of a loop nest defines its own (TVM's code generators need each
    variable, and each buffer, defined once)."""
    return substitute(stmt, [(var, tirx.Var(str(var.name), var.ty)) for var in defined])


def _conjuncts(cond: Any) -> list:
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _seq(binds: list, stmt: Any) -> Any:
    return tirx.SeqStmt([*binds, stmt]) if binds else stmt


class _Guarder:
    """One kernel body's rewrite; the analyzer carries the ranges and conditions in scope."""

    def __init__(self, loops: Sequence[Any], threads: Sequence[int] = (1, 1, 1), version_loops: bool = False,
                 on_chip: bool = False) -> None:
        self.analyzer = tvm.sym.Analyzer()
        self.version_loops = version_loops
        self.on_chip = on_chip
        self.added: list = []  # the conditions of the guards added so far (as proved: with_known)
        self.loops = list(loops)
        #: stand-ins of the T.get_thread_binding(d) markers, with the block's thread ranges
        self.thread_vars = [tirx.Var(f"thread_index_{d}", "int32") for d in range(3)]
        for var, extent in zip(self.thread_vars, threads):
            self.analyzer.bind(var, tvm.ir.Range.from_min_extent(0, int(extent)))
        self.placeholders: dict = {}
        self.counter = itertools.count()
        #: [(scalar buffer, value)]: per-thread scalars whose current value is a pure expression of
        #: variables (``i = bx * 64 + j``), substituted into the conditions the analyzer proves
        self.known: list = []
        self.facts: list = []  # the conjuncts of the conditions in scope
        for loop in loops:
            self._bind_loop(loop)

    def _guards(self, buffer: Any) -> bool:
        """Whether accesses of ``buffer`` are guarded: a global buffer's always, a tile's
        (``T.alloc_shared``, ``T.alloc_fragment``, ``T.alloc_local``) with ``on_chip`` (CPU
        targets). A ``T.alloc_var`` scalar is only ever read and written at [0]."""
        return _is_global(buffer) or (self.on_chip and not is_var_buffer(buffer))

    # -- conditions -----------------------------------------------------------------------------
    def _bind_loop(self, loop: Any) -> None:
        step = static_int(loop.step) if getattr(loop, "step", None) is not None else 1
        if step == 1:
            self.analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent), allow_override=True)

    def _with_known(self, expr: Any) -> Any:
        """``expr`` with the reads of known scalars replaced by their values and the thread/block
        index markers by variables of known range (for proofs only)."""

        def on_load(load: Any) -> Any:
            for buffer, value in self.known:
                if load.source.same_as(buffer):
                    return value
            return load

        def on_call(call: Any) -> Any:
            marker = parse_intrinsic(call)
            if marker is None or marker.name not in ("thread_binding", "block_binding"):
                return call
            axis = static_int(marker.args[0])
            if marker.name == "thread_binding" and axis is not None and 0 <= axis < 3:
                return self.thread_vars[axis]
            if marker.name == "block_binding" and axis is not None and 0 <= axis < len(self.loops):
                return self.loops[axis].loop_var
            return call

        return tvm_ffi.structural_map(expr, [(tvm.ir.TensorLoad, on_load), (tvm.ir.Call, on_call)])

    def _forget(self, buffers: Sequence[Any]) -> None:
        self.known = [(b, v) for b, v in self.known if not any(b.same_as(x) for x in buffers)]

    def _remember(self, store: Any) -> None:
        """After ``store``: the scalar it wrote is known when its value reads no memory."""
        self._forget([store.buffer])
        value = self._with_known(store.value)
        if is_var_buffer(store.buffer) and not _loads(value) and str(value.ty.dtype).startswith(("int", "uint")):
            self.known.append((store.buffer, value))

    @contextlib.contextmanager
    def _scope(self, cond: Any) -> Iterator[None]:
        """``cond`` holds inside the block: for the analyzer, and as literal facts (the analyzer
        loses a constraint on a complex expression under an outer one that rewrites it)."""
        cond = self._with_known(cond)
        facts = _conjuncts(cond)
        self.facts.extend(facts)
        try:
            with self.analyzer.constraint_scope(cond):
                yield
        finally:
            del self.facts[len(self.facts) - len(facts):]

    def _provable(self, cond: Any) -> bool:
        cond = self._with_known(cond)
        if any(tvm_ffi.structural_equal(cond, fact) for fact in self.facts):
            return True
        return bool(self.analyzer.can_prove(cond))

    def _inside(self, indices: Sequence[Any], shape: Sequence[Any], last_lanes: int = 1) -> Optional[Any]:
        """The condition keeping ``indices`` (and ``last_lanes - 1`` more elements along the last
        axis) inside ``shape``; None when it provably holds, or for vector indices."""
        conds = []
        for axis, (index, dim) in enumerate(zip(indices, shape)):
            if type(index).__name__ == "Ramp" or int(getattr(index.ty, "lanes", 1) or 1) != 1:
                return None  # vector accesses come from the operators, which guard themselves
            last = index + (last_lanes - 1) if axis == len(indices) - 1 and last_lanes > 1 else index
            i, d, j = static_int(index), static_int(dim), static_int(last)
            if i is not None and j is not None and d is not None and 0 <= i and j < d:
                continue
            lower = index >= tirx.IntImm(str(index.ty.dtype), 0)
            upper = last < cast(dim, str(last.ty.dtype))
            if (i is None or i < 0) and not self._provable(lower) and not self._provable(_narrow(self._with_known(index)) >= 0):
                conds.append(lower)
                self.added.append(self._with_known(lower))
            if not self._upper_provable(last, dim):
                conds.append(upper)
                self.added.append(self._with_known(upper))
        return all_of(conds)

    def _upper_provable(self, index: Any, dim: Any) -> bool:
        if self._provable(index < cast(dim, str(index.ty.dtype))):
            return True
        i, d = _narrow(self._with_known(index)), _narrow(dim)
        if str(i.ty.dtype) != str(d.ty.dtype):
            static = static_int(d)
            if static is None or static >= 2**31 or str(i.ty.dtype) != "int32":
                return False
            d = tirx.IntImm("int32", static)
        return self._provable(i < d)

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, e: Any, safe: tuple) -> Any:
        """``e`` with its global loads guarded (and its atomics, see :meth:`_atomic`)."""
        if e is None or not isinstance(e, tvm.ir.Expr):
            return e
        shielded = tvm_ffi.structural_map(e, [(tvm.ir.Call, lambda c: self._shield(c, safe))], order="pre")
        guarded = tvm_ffi.structural_map(shielded, [(tvm.ir.TensorLoad, lambda load: self._load(load, safe))])
        if not self.placeholders:
            return guarded
        return tvm_ffi.structural_map(guarded, [(tvm.ir.Var, self._restore)])

    def _placeholder(self, value: Any) -> Any:
        var = tirx.Var(f"{_PLACEHOLDER}{next(self.counter)}", value.ty)  # a pointer type for addresses
        self.placeholders[str(var.name)] = value
        return var

    def _restore(self, var: Any) -> Any:
        return self.placeholders.pop(str(var.name), var) if str(var.name).startswith(_PLACEHOLDER) else var

    def _shield(self, call: Any, safe: tuple) -> Any:
        """Calls whose parts are guarded under their own conditions, replaced by a placeholder
        variable (so the outer walk neither enters nor re-guards them) until :meth:`_restore`."""
        name = _op_name(call)
        if name == "prim.if_then_else":
            cond = self.expr(call.args[0], safe)
            with self._scope(cond):
                then = self.expr(call.args[1], safe)
            with self._scope(tirx.Not(cond)):
                other = self.expr(call.args[2], safe)
            return self._placeholder(tirx.if_then_else(cond, then, other))
        if name in ADDRESS_OPS:
            return self._placeholder(call)
        if extern_name(call) == atomics.ATOMIC_CALL and atomics.parse(call) is not None:
            _, new_call, cond = self._atomic(call, safe, bind=False)  # an expression: no binds
            if cond is None:
                return self._placeholder(new_call)
            return self._placeholder(tirx.if_then_else(cond, new_call, tirx.const(0, str(call.ty.dtype))))
        return call

    def _load(self, load: Any, safe: tuple) -> Any:
        buffer = load.source
        if not self._guards(buffer) or int(getattr(load.ty, "lanes", 1) or 1) != 1:
            return load
        cond = self._inside(load.indices, buffer.ty.shape)
        if cond is None:
            return load
        fallback = tirx.const(0, str(load.ty.dtype))
        for annotated, value in reversed(safe):
            if annotated.same_as(buffer):
                fallback = cast(value, str(load.ty.dtype))
                break
        return tirx.if_then_else(cond, load, fallback)

    def _guarded_indices(self, buffer: Any, indices: list, lanes: int = 1, bind: bool = True) -> tuple:
        """``(binds, indices, condition or None)`` of an access of ``buffer`` at ``indices``: with
        ``bind``, an index read from memory (``H[idx[i]]``) is bound once by ``binds``, so the guard
        and the access use one read of it."""
        cond = self._inside(indices, buffer.ty.shape, lanes)
        if cond is None or not bind or not any(_reads_memory(i) for i in indices):
            return [], indices, cond
        binds, bound = [], []
        for index in indices:
            if _reads_memory(index):
                var = tirx.Var("guarded_index", str(index.ty.dtype))
                binds.append(tirx.Bind(var, index))
                index = var
            bound.append(index)
        return binds, bound, self._inside(bound, buffer.ty.shape, lanes)

    def _atomic(self, call: Any, safe: tuple, bind: bool = True) -> tuple:
        """``(binds, call with guarded operands, condition of its destination or None)``."""
        a = atomics.parse(call)
        load = a.load
        indices = [self.expr(i, safe) for i in load.indices]
        binds, cond = [], None
        if self._guards(load.source):
            lanes = int(a.op[len("addx"):].split("_")[0]) if a.op.startswith("addx") else 1
            binds, indices, cond = self._guarded_indices(load.source, indices, lanes, bind)
        values = [self.expr(v, safe) for v in a.values]
        ptr_args = list(a.ptr.args)
        ptr_args[0] = tirx.BufferLoad(load.source, indices)
        args = list(call.args)
        args[4] = tvm.ir.Call(a.ptr.op, ptr_args, ret_ty=a.ptr.ty)
        args[5:] = values
        return binds, tvm.ir.Call(call.op, args, ret_ty=call.ty), cond

    # -- loop versioning --------------------------------------------------------------------------
    def _loop_nest(self, loop: Any, ndim: int, safe: tuple, marker: Any = None) -> Any:
        """A loop nest (``ndim`` perfectly nested loops; a ``T.Parallel`` one after its ``marker``)
        with its body guarded. On CPU targets, when the body holds no other loop and every guard
        added in it is affine in the nest's variables, the nest is versioned: ``if <every guard
        holds at the corners of the iteration box>: <nest without the guards> else: <guarded
        nest>``, so the blocks inside the tensor run the plain (vectorizable) loop."""
        loops = parallel_loops(loop, ndim)
        if len(loops) < ndim:  # malformed nest: the frontend reports it
            guarded = self._plain_loop(loop, safe)
            return guarded if marker is None else tirx.SeqStmt([marker, guarded])
        body = loops[-1].body
        changed = _stored_buffers(body)
        self._forget(changed)
        for lp in loops:
            self._bind_loop(lp)
        entry_known, mark = list(self.known), len(self.added)
        guarded_body = self.stmt(body, safe)
        conds = self.added[mark:]
        self._forget(changed)
        after_known = list(self.known)
        guarded = self._rebuild(loops, guarded_body)
        if marker is not None:
            guarded = tirx.SeqStmt([marker, guarded])
        cond = self._interior(conds, loops, body) if conds and self.version_loops and not _contains_loops(body) else None
        if cond is None:
            return guarded
        self.known = entry_known
        self.facts.extend(conds)
        try:
            fast_body = self.stmt(body, safe)
        finally:
            del self.facts[len(self.facts) - len(conds):]
            del self.added[mark + len(conds):]
            self.known = after_known
        fast = _fresh_copy(self._rebuild(loops, fast_body), [lp.loop_var for lp in loops] + _defined_vars(body))
        if marker is not None:
            fast = tirx.SeqStmt([marker, fast])
        return tirx.IfThenElse(cond, fast, guarded)

    def _plain_loop(self, s: Any, safe: tuple) -> Any:
        """A ``For`` or ``While`` loop with its body guarded (not versioned). The scalars it stores
        are loop-carried: unknown inside the loop and after it."""
        changed = _stored_buffers(s.body)
        self._forget(changed)
        if isinstance(s, tirx.While):
            loop = tirx.While(self.expr(s.condition, safe), self.stmt(s.body, safe), s.span)
        else:
            self._bind_loop(s)
            loop = self._rebuild([s], self.stmt(s.body, safe))
        self._forget(changed)
        return loop

    @staticmethod
    def _rebuild(loops: list, body: Any) -> Any:
        for lp in reversed(loops):
            body = tirx.For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_binding, lp.annotations, lp.step, lp.span)
        return body

    def _interior(self, conds: list, loops: list, body: Any) -> Optional[Any]:
        """The condition under which every guard in ``conds`` holds for the whole iteration box of
        ``loops`` (each guard checked at its weakest corner), None when that cannot be told: a guard
        reading memory, naming a variable defined in the body or a thread index, or not affine."""
        if any(getattr(lp, "step", None) is not None and static_int(lp.step) != 1 for lp in loops):
            return None
        inner = _defined_vars(body) + self.thread_vars
        checks = []
        for cond in conds:
            if _loads(cond) or not isinstance(cond, (tirx.LT, tirx.LE, tirx.GT, tirx.GE)) or _divides_by_variable(cond):
                return None  # (the check runs before the loop, also when it has no iteration)
            if any(v.same_as(x) for v in collect(cond, tvm.ir.Var) for x in inner):
                return None
            # affine in each loop variable: the condition is weakest at one corner of the box,
            # where a - b is largest (a < b, a <= b) or smallest (a > b, a >= b)
            diff = cond.a - cond.b
            upper = isinstance(cond, (tirx.LT, tirx.LE))
            corner = []
            for lp in loops:
                var = lp.loop_var
                step = static_int(self.analyzer.simplify(substitute(diff, [(var, var + 1)]) - diff))
                if step is None:
                    return None
                last = lp.min + lp.extent - 1
                corner.append((var, last if (step > 0) == upper and step != 0 else lp.min))
            checks.append(substitute(cond, corner))
        unique: list = []
        for check in (self.analyzer.simplify(c) for c in checks):
            if static_int(check) == 1 or any(tvm_ffi.structural_equal(check, u) for u in unique):
                continue
            if static_int(check) == 0:
                return None
            unique.append(check)
        return all_of(unique) if unique else None

    # -- statements -----------------------------------------------------------------------------
    def _assumption_end(self, cond: Any, seq: list, start: int) -> int:
        """Where the promise of ``T.assume(cond)`` before ``seq[start]`` stops: the index of the
        first statement that may write a buffer ``cond`` reads (a store, or its address passed on;
        the value then may differ), or the end of ``seq``. A condition on the current value of a
        known scalar (``x = l``) is about ``l`` and outlives stores into ``x``."""
        read = [load.source for load in _loads(self._with_known(cond))]
        end = start
        while end < len(seq):
            stmt = seq[end]
            if any(b.same_as(r) for b in _stored_buffers(stmt) for r in read):
                break
            end += 1
        return end

    def stmt(self, s: Any, safe: tuple) -> Any:
        """``s`` with its global accesses guarded."""
        if isinstance(s, tirx.SeqStmt):
            out = []
            seq = list(s.seq)
            k = 0
            while k < len(seq):
                child = seq[k]
                annotated = safe_value_marker(child)
                assumed = _assumption(child)
                if annotated is not None:  # holds for the rest of this scope (the frontend drops it)
                    safe = (*safe, annotated)
                    out.append(child)
                elif assumed is not None:
                    out.append(child)
                    end = self._assumption_end(assumed, seq, k + 1)
                    if end > k + 1:  # the statements the promise covers, under it
                        rest = seq[k + 1:end]
                        with self._scope(assumed):
                            covered = self.stmt(rest[0] if len(rest) == 1 else tirx.SeqStmt(rest), safe)
                        out.extend(list(covered.seq) if isinstance(covered, tirx.SeqStmt) else [covered])
                        k = end - 1
                elif parallel_ndim(child) is not None and k + 1 < len(seq) and isinstance(seq[k + 1], tirx.For):
                    out.append(self._loop_nest(seq[k + 1], parallel_ndim(child), safe, child))  # T.Parallel
                    k += 1
                else:
                    out.append(self.stmt(child, safe))
                k += 1
            return out[0] if len(out) == 1 else tirx.SeqStmt(out, s.span)
        if isinstance(s, tirx.For) and not _contains_loops(s.body):
            return self._loop_nest(s, 1, safe)
        if isinstance(s, (tirx.For, tirx.While)):
            return self._plain_loop(s, safe)
        if isinstance(s, tirx.IfThenElse):
            cond = self.expr(s.condition, safe)
            before = list(self.known)
            with self._scope(cond):
                then = self.stmt(s.then_case, safe)
            self.known = list(before)
            other = None
            if s.else_case is not None:
                with self._scope(tirx.Not(cond)):
                    other = self.stmt(s.else_case, safe)
            self.known = before
            self._forget(_stored_buffers(s.then_case) + (_stored_buffers(s.else_case) if s.else_case is not None else []))
            return tirx.IfThenElse(cond, then, other, s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, self.stmt(s.body, safe), s.span)
        if isinstance(s, (tirx.Bind, tirx.LetStmt)):
            self._forget(_address_taken(s.value))
            value = self.expr(s.value, safe)
            if str(getattr(s.var.ty, "dtype", "")).startswith(("int", "uint")):
                self.analyzer.bind(s.var, self._with_known(value), allow_override=True)
            return type(s)(s.var, value, s.span)
        if isinstance(s, tirx.BufferStore):
            self._forget(_address_taken(s))  # an atomic in the value may write a scalar
            indices = [self.expr(i, safe) for i in s.indices]
            if not self._guards(s.buffer):
                store = tirx.BufferStore(s.buffer, self.expr(s.value, safe), indices, s.span)
                self._remember(store)
                return store
            binds, indices, cond = self._guarded_indices(s.buffer, indices)
            if cond is None:
                value = self.expr(s.value, safe)
            else:  # the value is computed inside the store's guard (A[i] += 1 reads A[i] there)
                with self._scope(cond):
                    value = self.expr(s.value, safe)
            store = tirx.BufferStore(s.buffer, value, indices, s.span)
            return _seq(binds, store if cond is None else tirx.IfThenElse(cond, store, None))
        if isinstance(s, tirx.Evaluate):
            value = s.value
            self._forget(_address_taken(value))  # an atomic or extern call may write through an address
            if extern_name(value) == atomics.ATOMIC_CALL and atomics.parse(value) is not None:
                binds, call, cond = self._atomic(value, safe)
                done = tirx.Evaluate(call, s.span)
                return _seq(binds, done if cond is None else tirx.IfThenElse(cond, done, None))
            if extern_name(value) is not None and extern_name(value).startswith("tl."):
                return s  # frontend markers (T.Parallel, T.print, ...): their operands are not reads
            return tirx.Evaluate(self.expr(value, safe), s.span)
        return s


def guard_global_accesses(body: Any, loops: Sequence[Any] = (), threads: Sequence[int] = (1, 1, 1),
                          version_loops: bool = False, on_chip: bool = False) -> Any:
    """``body`` (one ``T.Kernel``'s) with its global accesses guarded (module docstring).

    :param loops: the kernel's block loops, whose ranges the guards may rely on.
    :param threads: the block's thread counts per axis (the ranges of ``T.get_thread_binding``).
    :param version_loops: CPU targets: a loop nest whose guards are affine gets a guard-free copy
        for the iterations that are all inside (see :meth:`_Guarder._loop_nest`).
    :param on_chip: CPU targets: the kernel's tiles (shared, fragment and local buffers) are
        guarded too; their accesses outside the tile wrote over the stack or the heap.
    """
    return _Guarder(loops, threads, version_loops, on_chip).stmt(body, ())
