"""Workspaces of CPU kernels: on the heap where the stack cannot hold them, of the size the kernel
needs, released on every way out of the kernel.

**C entry point** (target ``c``, consumer ``device_source``): TVM's C code generator can only
print constant-size stack arrays, and a large workspace on the stack of the calling thread can
overflow it, so every top-level ``global``-scope allocation (``T.alloc_global``), and every large
or run-time sized tile of a block (:data:`C_STACK_LIMIT_BYTES`), becomes::

    T* W = tl_workspace_alloc(bytes);  if (W == NULL) { <release the earlier ones>; return -2; }
    ... the statements that follow the allocation ...
    tl_workspace_free(W);

(:func:`heap_workspaces`). Every ``return`` among the statements that follow (a failed
``T.device_assert``, a failed block range, a later allocation that failed) first frees the
workspaces allocated so far. The two helpers (``malloc``/``free``) come with the source through
``pragma_import_c``. A large or run-time sized tile declared inside a loop of its block
(``T.Pipelined``, ``T.serial``) is allocated once, before the outermost such loop, and its
storage serves every iteration; one whose size depends on that loop is allocated in each
iteration, the loops around it without ``#pragma omp simd`` (which its ``return`` could not
leave). Such tiles stayed on the stack before: 8 MiB in a pipelined loop was a segfault.

**Runtime modules** (targets ``c`` and ``llvm``, consumer ``runtime_module``): TVM's
``LowerTVMBuiltin`` turns allocations into ``TVMBackendAllocWorkspace`` / ``...FreeWorkspace``
pairs, and a failing assertion (``T.device_assert``) returns between the two: each failing call
kept its workspaces, 4 MiB per call for a 1M-float ``T.alloc_global``.
:func:`release_workspaces_on_assert` makes the pair explicit for every allocation that encloses
such an assertion, and frees them before the assertion fails; and for every allocation of a
run-time size, of the size below.

**Run-time sizes.** After ``FlattenBuffer`` a tile ``(n, m)`` has the one extent ``n * m``, an
int32 product that wrapped (``65536 * 65536`` is 0: ``malloc(1)``, then a heap overflow). The
size of every workspace whose size is known at call time only is computed again, in int64 from
its leaves (:class:`ExactSize`), each step checked against the range of its own integer type,
and compared with what the kernel can index (:data:`INDEX_LIMIT_32` elements when an extent or an
index of the tile is 32-bit). A call whose sizes make it too large fails before anything is
allocated: the C entry returns :data:`WORKSPACE_ALLOC_FAILED` (it has no text of its own; the
backends raise the error ``calling.STATUS_TEXTS`` gives that status), an ``llvm`` runtime module
raises ``RuntimeError`` naming the tile, its line, its size and what to do, checked before the
parallel loop that holds the tile where the size allows (TVM's parallel launch drops an error
raised inside it). The exact int64 arithmetic is lowering/exact_sizes.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import PointerType, PrimType

from ..calling import WORKSPACE_ALLOC_FAILED  # out of memory, or too large for the sizes of the call
from ..language.spans import node_location
from ..language.tileops._common import collect
from .exact_sizes import BOUND_64, ExactSize, Lets, all_of, as_bool, as_i64, is_int
from .frontend import contains, without_simd_pragmas
from .source_imports import c_definitions, with_import
from .stack_buffers import C_STACK_LIMIT_BYTES, KEEP_ON_STACK, STACK_TOTAL_BYTES, TVM_STACK_ALLOCA_BYTES, constant_bytes

__all__ = ["C_STACK_LIMIT_BYTES", "INDEX_LIMIT_32", "WORKSPACE_ALLOC_FAILED", "heap_workspaces",
           "release_workspaces_on_assert"]


#: C element types as TVM's C code generator prints them (bfloat16 is stored as uint16_t).
_C_TYPES = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "half", "bfloat16": "uint16_t", "float32": "float", "float64": "double",
}

_CPU_DEVICE = 1  # kDLCPU


def _helpers(dtypes: list) -> str:
    # Guarded: every C function of a kernel (the entry and each outlined block loop) imports the
    # helpers it uses, so one source may carry the same pair several times.
    def pair(dtype: str) -> str:
        t = _C_TYPES[dtype]
        guard = f"TL_WORKSPACE_HELPERS_{dtype.upper()}"
        return (
            f"#ifndef {guard}\n#define {guard}\n"
            f"static inline {t}* tl_workspace_alloc_{dtype}(int64_t bytes) {{ return ({t}*)malloc(bytes > 0 ? (size_t)bytes : 1); }}\n"
            f"static inline int32_t tl_workspace_free_{dtype}({t}* p) {{ free(p); return 0; }}\n"
            "#endif\n"
        )

    return c_definitions(
        "\n/* tilelang workspaces (T.alloc_global) */\n#include <stdlib.h>\n#include <stdint.h>\n",
        map(pair, dtypes),
    )


def _is_global_alloc(stmt: Any) -> bool:
    return isinstance(stmt, tirx.AllocBuffer) and (str(stmt.buffer.ty.storage_scope) or "global") == "global"


def _element_bytes(buf: Any) -> int:
    dtype = tvm.runtime.DataType(str(buf.ty.dtype))
    return (dtype.bits * dtype.lanes + 7) // 8


def _bytes(buf: Any) -> Any:
    """The size of ``buf`` in bytes (int64) from its extents as they are: right for constant ones."""
    total: Any = tirx.IntImm("int64", _element_bytes(buf))
    for extent in buf.ty.shape:
        total = total * tirx.Cast("int64", extent)
    return total


def _seq(items: list) -> Any:
    """``items`` as one statement (TVM refuses a ``SeqStmt`` of one)."""
    if not items:
        return tirx.Evaluate(tirx.IntImm("int32", 0))
    return items[0] if len(items) == 1 else tirx.SeqStmt(items)


def _with_body(stmt: Any, body: Any) -> Any:
    """``stmt`` (a ``For``, ``While`` or ``AttrStmt``) with ``body`` in place of its own."""
    if body.same_as(stmt.body):
        return stmt
    if isinstance(stmt, tirx.For):
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                        stmt.annotations, stmt.step, stmt.span)
    if isinstance(stmt, tirx.While):
        return tirx.While(stmt.condition, body, stmt.span)
    return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body, stmt.span)


# --------------------------------------------------------------------------------------------
# Sizes known at call time only
# --------------------------------------------------------------------------------------------

#: The most elements of a buffer that the kernel indexes with 32-bit integers: ``S[i, j]`` of a
#: tile ``(n, m)`` is ``S[i * m + j]`` computed in int32, which wraps past this.
INDEX_LIMIT_32 = 2**31 - 1

#: Annotation of an allocation whose size was checked before a parallel loop: its element count.
_CHECKED_ELEMENTS = "tl.workspace_elements"

#: The language call that makes a tile of each scope (for messages).
_ALLOC_CALLS = {"shared": "T.alloc_shared", "shared.dyn": "T.alloc_shared", "local": "T.alloc_local",
                "local.fragment": "T.alloc_fragment", "local.var": "T.alloc_var", "global": "T.alloc_global"}

@dataclass
class _Size:
    """The checked size of a workspace of a run-time size.

    ``stmts`` bind ``fits`` (whether the sizes of this call give a size the kernel can index and
    int64 can count) and ``elements`` (its element count, at least 1); ``text`` says, for a
    ``RuntimeError``, what does not fit.
    """

    stmts: list
    fits: Any
    elements: Any
    text: str


def _narrow_indexed(body: Any) -> list:
    """The data variables of the buffers ``body`` indexes with an integer narrower than 64 bits
    (a load, a store, or a call such as ``tvm_access_ptr`` given the data and a 32-bit offset)."""
    narrow: list = []

    def is_narrow(index: Any) -> bool:
        ty = getattr(index, "ty", None)
        if not isinstance(ty, PrimType):
            return False
        dtype = str(ty.dtype)
        return is_int(dtype) and tvm.runtime.DataType(dtype).bits < 64

    for load in collect(body, tvm.ir.TensorLoad):
        if any(is_narrow(i) for i in load.indices):
            narrow.append(load.source.data)
    for store in collect(body, tirx.BufferStore):
        if any(is_narrow(i) for i in store.indices):
            narrow.append(store.buffer.data)
    for call in collect(body, tvm.ir.Call):
        args = list(call.args)
        if any(not isinstance(a, tvm.ir.Var) and is_narrow(a) for a in args):
            narrow.extend(a for a in args if isinstance(a, tvm.ir.Var) and isinstance(a.ty, PointerType))
    return narrow


def _tile_text(stmt: Any, lets: Lets) -> str:
    """``T.alloc_shared at file:line: the tile 'S' of n * m float32 elements`` (for messages)."""
    buf = stmt.buffer
    call = _ALLOC_CALLS.get(str(buf.ty.storage_scope) or "global", "an allocation")
    extent = " * ".join(f"({lets.expand(e)})" if len(buf.ty.shape) > 1 else str(lets.expand(e)) for e in buf.ty.shape)
    return f"{call} at {node_location(stmt, '<unknown line>')}: the tile '{buf}' of {extent} {buf.ty.dtype} elements"


def _run_time_size(stmt: Any, lets: Lets, narrow: list) -> Optional[_Size]:
    """The checked size of the allocation ``stmt`` when it is known at call time only, else None.

    :param narrow: :func:`_narrow_indexed` of the function: a buffer found there, or one with a
        32-bit extent, may hold :data:`INDEX_LIMIT_32` elements at most.
    """
    buf = stmt.buffer
    if constant_bytes(buf) is not None:
        return None
    exact = ExactSize(lets, f"{buf}_size")
    valid, count = exact.evaluate(buf.ty.shape[0])
    for extent in list(buf.ty.shape)[1:]:  # one extent after FlattenBuffer
        valid_e, value = exact.evaluate(extent)
        valid, count = exact.product(all_of(valid, valid_e), count, value)
    wide = all(tvm.runtime.DataType(str(e.ty.dtype)).bits >= 64 for e in buf.ty.shape) and not any(
        v.same_as(buf.data) for v in narrow)
    limit = BOUND_64 // _element_bytes(buf) if wide else INDEX_LIMIT_32
    fits = exact.bind(as_bool(all_of(valid, as_i64(count) <= as_i64(limit))), "bool")
    elements = exact.bind(tirx.Select(as_i64(count) > as_i64(0), as_i64(count), as_i64(1)), "int64")
    stmts, (fits, elements) = exact.in_array(f"{buf}_size", [fits, elements])
    if not isinstance(elements, tirx.IntImm):
        count_var = tirx.Var(f"{buf}_elements", PrimType("int64"))
        stmts.append(tirx.Bind(count_var, elements))
        elements = count_var
    if wide:
        remedy = "more bytes than int64 counts; make it smaller"
    else:
        remedy = (f"more than {limit} elements, the most that its 32-bit indices reach; declare the sizes it depends on "
                  "int64 (T.dynamic('n', 'int64')) so that it is indexed in 64 bits, or make it smaller")
    text = f"{_tile_text(stmt, lets)} is too large for the sizes of this call: {remedy}"
    return _Size(stmts, fits, elements, text)


def _checked_bytes(buf: Any, size: Optional[Any]) -> Any:
    """The bytes to allocate for ``buf``: ``size`` elements (a run-time count), else its extents."""
    return _bytes(buf) if size is None else size * tirx.IntImm("int64", _element_bytes(buf))


# --------------------------------------------------------------------------------------------
# Allocations made explicit
# --------------------------------------------------------------------------------------------


def _then_release(live: list, exit_stmt: Any) -> Any:
    """``exit_stmt`` preceded by the release of the ``live`` workspaces (innermost first)."""
    return tirx.SeqStmt(list(reversed(live)) + [exit_stmt]) if live else exit_stmt


# An allocation rule: (stmt, the statements after it in its sequence, live, top, loops) -> None
# (not an allocation it takes) or (statements replacing it, the statement releasing it).
_Allocate = Callable[[Any, list, list, bool, int], Optional[tuple]]
# A loop rule: (loop, live) -> (the loop, statements to run before it).
_BeforeLoop = Callable[[Any, list], tuple]


def _with_releases(stmt: Any, live: list, top: bool, allocate: _Allocate, on_exit: Callable[[Any, list], Any],
                   loops: int = 0, before_loop: Optional[_BeforeLoop] = None) -> Any:
    """``stmt`` with the allocations ``allocate`` takes made explicit (released at the end of
    their sequence) and each exit statement rewritten by ``on_exit(stmt, live)``.

    ``live`` holds the release statements of the enclosing workspaces; ``top`` is True outside
    every loop and condition; ``loops`` counts the enclosing loops; ``before_loop`` may rewrite a
    ``For`` and put statements before it.
    """
    def again(s: Any, inner_top: bool = False, inner_loops: int = loops) -> Any:
        return _with_releases(s, live, top and inner_top, allocate, on_exit, inner_loops, before_loop)

    if isinstance(stmt, tirx.SeqStmt):
        out: list = []
        mine: list = []
        items = list(stmt.seq)
        for k, item in enumerate(items):
            taken = allocate(item, items[k + 1:], live + mine, top, loops)
            if taken is None:
                out.append(_with_releases(item, live + mine, top, allocate, on_exit, loops, before_loop))
                continue
            replacement, release = taken
            out.extend(replacement)
            mine.append(release)
        if not mine and len(out) == len(items) and all(a.same_as(b) for a, b in zip(out, items)):
            return stmt
        return tirx.SeqStmt(out + list(reversed(mine)))
    if isinstance(stmt, tirx.AttrStmt):
        return _with_body(stmt, again(stmt.body, inner_top=True))
    if isinstance(stmt, tirx.For):
        first: list = []
        if before_loop is not None:
            stmt, first = before_loop(stmt, live)
        loop = _with_body(stmt, again(stmt.body, inner_loops=loops + 1))
        return tirx.SeqStmt(first + [loop]) if first else loop
    if isinstance(stmt, tirx.While):
        return _with_body(stmt, again(stmt.body, inner_loops=loops + 1))
    if isinstance(stmt, tirx.IfThenElse):
        then = again(stmt.then_case)
        other = again(stmt.else_case) if stmt.else_case is not None else None
        if then.same_as(stmt.then_case) and (other is None or other.same_as(stmt.else_case)):
            return stmt
        return tirx.IfThenElse(stmt.condition, then, other, stmt.span)
    if live:
        return on_exit(stmt, live)
    return stmt


def _local_candidate(stmt: Any) -> bool:
    """A block's local allocation of a C type (not global, not kept on the stack by a mark)."""
    return (isinstance(stmt, tirx.AllocBuffer) and not _is_global_alloc(stmt) and KEEP_ON_STACK not in stmt.annotations
            and str(stmt.buffer.ty.dtype) in _C_TYPES)  # a vector dtype: left to TVM (refused for c anyway)


def _over_stack_total(body: Any) -> list:
    """The local allocations of ``body`` that would be stack arrays (constant, under
    :data:`C_STACK_LIMIT_BYTES`) past the first :data:`STACK_TOTAL_BYTES` of them, in program order."""
    over, used = [], 0
    for stmt in collect(body, tirx.AllocBuffer):
        size = constant_bytes(stmt.buffer) if _local_candidate(stmt) else None
        if size is None or size >= C_STACK_LIMIT_BYTES:
            continue
        used += size
        if used > STACK_TOTAL_BYTES:
            over.append(stmt)
    return over


def _heap_local(stmt: Any, over_total: list = ()) -> bool:
    """A block's local allocation the C entry takes from the heap: large, of a run-time size, or
    past the stack total (``over_total``, from :func:`_over_stack_total`).

    At any depth: one of an inner loop of the block that :func:`_hoist_from_inner_loops` could
    not move is taken where it is, the loops around it without ``#pragma omp simd``, which the
    ``return`` of a failed allocation could not leave."""
    if not _local_candidate(stmt):
        return False
    size = constant_bytes(stmt.buffer)
    return size is None or size >= C_STACK_LIMIT_BYTES or any(stmt.same_as(o) for o in over_total)


def _removed(stmt: Any, moved: list) -> Any:
    """``stmt`` without the statements ``moved`` (``Bind``s and ``AllocBuffer``s in it)."""
    nop = tirx.Evaluate(tirx.IntImm("int32", 0))

    def gone(s: Any) -> bool:
        return s.same_as(nop) or any(s.same_as(m) for m in moved)

    def on_seq(seq: Any) -> Any:
        items = [s for s in seq.seq if not gone(s)]
        return seq if len(items) == len(seq.seq) else _seq(items)

    def on_single(s: Any) -> Any:
        return nop if gone(s) else s

    return tvm_ffi.structural_map(stmt, [(tirx.SeqStmt, on_seq), ((tirx.AllocBuffer, tirx.Bind), on_single)])


def _hoistable(loop: Any, alloc: Any, lets: Lets) -> Optional[list]:
    """The ``Bind``s inside ``loop`` that the size of ``alloc`` (inside it too) needs, in program
    order, to move out of the loop with it; None when the size depends on a variable the loop
    sets (a loop variable, a value read inside it)."""
    binds = collect(loop, tirx.Bind)
    loop_vars = [f.loop_var for f in collect(loop, tirx.For)]
    needed: list = []
    pending = [v for e in alloc.buffer.ty.shape for v in collect(e, tvm.ir.Var)]
    while pending:
        var = pending.pop()
        if any(var.same_as(v) for v in loop_vars):
            return None
        bind = next((b for b in binds if b.var.same_as(var)), None)
        if bind is None or any(bind.same_as(b) for b in needed):
            continue
        if lets.value(var) is None:
            return None
        needed.append(bind)
        pending.extend(collect(bind.value, tvm.ir.Var))
    return [b for b in binds if any(b.same_as(n) for n in needed)]


def _without_simd_around(body: Any, kept: list) -> Any:
    """``body`` without the ``#pragma omp simd`` markers of the loops that hold an allocation of
    ``kept`` (a ``return`` may not leave such a loop; a loop holding an allocation has no marker
    from the frontend, so this is a safeguard)."""
    if not kept:
        return body
    return without_simd_pragmas(body, lambda loop: any(k.same_as(a) for a in collect(loop, tirx.AllocBuffer)
                                                       for k in kept))


def _hoist_from_inner_loops(body: Any, lets: Lets, over_total: list = ()) -> Any:
    """``body`` (a C function's) with every allocation for the heap (:func:`_heap_local`) that is
    inside a loop of a block loop moved, with the ``Bind``s its size needs, before the outermost
    such loop: one allocation, whose storage every iteration reuses (each had an uninitialized
    array of its own before; on the C entry every loop runs on one thread, and a loop holding an
    allocation gets no ``#pragma omp simd``). One whose size depends on the loop
    (``T.alloc_local((n * r,), ...)`` in ``for r``) stays: allocated and freed in every iteration."""
    kept: list = []

    def visit(stmt: Any, loops: int) -> Any:
        if isinstance(stmt, tirx.SeqStmt):
            items = [visit(s, loops) for s in stmt.seq]
            return stmt if all(a.same_as(b) for a, b in zip(items, stmt.seq)) else tirx.SeqStmt(items)
        if isinstance(stmt, tirx.AttrStmt):
            return _with_body(stmt, visit(stmt.body, loops))
        if isinstance(stmt, tirx.IfThenElse):
            then = visit(stmt.then_case, loops)
            other = visit(stmt.else_case, loops) if stmt.else_case is not None else None
            if then.same_as(stmt.then_case) and (other is None or other.same_as(stmt.else_case)):
                return stmt
            return tirx.IfThenElse(stmt.condition, then, other, stmt.span)
        if isinstance(stmt, (tirx.For, tirx.While)):
            return hoist(stmt) if loops >= 1 else _with_body(stmt, visit(stmt.body, loops + 1))
        return stmt

    def hoist(loop: Any) -> Any:
        moved: list = []
        binds: list = []
        for alloc in collect(loop, tirx.AllocBuffer):
            if not _heap_local(alloc, over_total):
                continue
            needed = _hoistable(loop, alloc, lets)
            if needed is None:
                kept.append(alloc)
                continue
            moved.append(alloc)
            binds.extend(b for b in needed if not any(b.same_as(x) for x in binds))
        if not moved:
            return loop
        binds = [b for b in collect(loop, tirx.Bind) if any(b.same_as(x) for x in binds)]  # program order
        return tirx.SeqStmt(binds + moved + [_removed(loop, binds + moved)])

    return _without_simd_around(visit(body, 0), kept)


def heap_workspaces(body: Any) -> Any:
    """``body`` (a plain C entry's) with its top-level global-scope ``AllocBuffer``s, and its
    large, run-time sized or over-the-total block-level local ones (:data:`C_STACK_LIMIT_BYTES`,
    :data:`STACK_TOTAL_BYTES`, lowering/stack_buffers.py), on the heap,
    freed at the end of their scope and before every ``return`` in it (module docstring).

    Global allocations are moved only outside loops (where ``T.alloc_global`` belongs: before
    ``T.Kernel``); local ones declared in a loop of their block are first moved before it where
    their size allows (:func:`_hoist_from_inner_loops`). The ``return`` of a failed allocation
    leaves neither an OpenMP loop (block loops are outlined functions) nor a ``#pragma omp simd``
    one. The size of a run-time sized one is checked first (:func:`_run_time_size`): too large
    for the sizes of the call, the entry returns :data:`WORKSPACE_ALLOC_FAILED` too.
    """
    dtypes: list = []
    lets = Lets(body)
    over_total = _over_stack_total(body)
    body = _hoist_from_inner_loops(body, lets, over_total)
    narrow = _narrow_indexed(body)

    def allocate(stmt: Any, rest: list, live: list, top: bool, loops: int) -> Optional[tuple]:  # noqa: ARG001
        if not ((top and _is_global_alloc(stmt)) or _heap_local(stmt, over_total)):
            return None
        buf = stmt.buffer
        dtype = str(buf.ty.dtype)
        if dtype not in _C_TYPES:
            return None  # a vector dtype: left to TVM (refused for target c anyway)
        dtypes.append(dtype)
        give_up = _then_release(live, tirx.Return(tirx.IntImm("int32", WORKSPACE_ALLOC_FAILED)))
        size = _run_time_size(stmt, lets, narrow)
        check = [] if size is None else [*size.stmts, tirx.IfThenElse(tirx.Not(size.fits), give_up, None)]
        ptype = PointerType(PrimType(dtype), str(buf.ty.storage_scope) or "global")
        ptr = tirx.Var(f"{buf}_heap", ptype)
        failed = tirx.call_intrin("bool", "tirx.isnullptr", ptr)
        release = tirx.Evaluate(tirx.call_extern("int32", f"tl_workspace_free_{dtype}", ptr))
        nbytes = _checked_bytes(buf, None if size is None else size.elements)
        return ([*check, tirx.Bind(ptr, tirx.call_extern(ptype, f"tl_workspace_alloc_{dtype}", nbytes)),
                 tirx.IfThenElse(failed, give_up, None), tirx.DeclBuffer(buf, data=ptr)], release)

    def on_exit(stmt: Any, live: list) -> Any:
        return _then_release(live, stmt) if isinstance(stmt, tirx.Return) else stmt

    body = _with_releases(body, [], True, allocate, on_exit)
    if not dtypes:
        return body
    return with_import(body, "pragma_import_c", _helpers(sorted(set(dtypes))))


def _failing_assert(kind: Any, parts: list) -> Any:
    """An assertion that fails, raising ``kind`` with ``parts`` (TVM 0.27: condition, kind, parts)."""
    return tirx.AssertStmt(tirx.IntImm("bool", 0), kind, parts)


def _too_large(live: list, size: _Size) -> list:
    """The statements checking ``size``: a ``RuntimeError`` with its text when it does not fit."""
    fail = _failing_assert(tvm.ir.StringImm("RuntimeError"), [tvm.ir.StringImm(size.text)])
    return [*size.stmts, tirx.IfThenElse(tirx.Not(size.fits), _then_release(live, fail), None)]


def _reachable_allocs(stmt: Any) -> list:
    """The allocations inside ``stmt`` that run whenever it does (no condition or ``while`` between)."""
    if isinstance(stmt, tirx.AllocBuffer):
        return [stmt]
    if isinstance(stmt, tirx.SeqStmt):
        return [a for s in stmt.seq for a in _reachable_allocs(s)]
    if isinstance(stmt, (tirx.AttrStmt, tirx.For)):
        return _reachable_allocs(stmt.body)
    return []


def _checks_before_parallel(lets: Lets, narrow: list) -> _BeforeLoop:
    """The loop rule of runtime modules: the size of each run-time sized allocation inside a
    parallel loop is checked before the loop when it depends on nothing the loop sets (TVM's
    parallel launch drops an error raised inside it), and the allocation is annotated with the
    checked count (:data:`_CHECKED_ELEMENTS`)."""
    def before(loop: Any, live: list) -> tuple:
        if loop.kind != tirx.ForKind.PARALLEL:
            return loop, []
        inside = [f.loop_var for f in collect(loop, tirx.For)] + [b.var for b in collect(loop, tirx.Bind)]
        checks: list = []
        annotated: list = []
        for alloc in _reachable_allocs(loop.body):
            if KEEP_ON_STACK in alloc.annotations or _CHECKED_ELEMENTS in alloc.annotations:
                continue
            exact = _leaves_of(alloc, lets)
            if exact is None or any(v.same_as(w) for v in exact for w in inside):
                continue
            size = _run_time_size(alloc, lets, narrow)
            checks.extend(_too_large(live, size))
            annotated.append((alloc, size.elements))

        def on_alloc(stmt: Any) -> Any:
            for alloc, elements in annotated:
                if stmt.same_as(alloc):
                    annotations = {**dict(stmt.annotations), _CHECKED_ELEMENTS: elements}
                    return tirx.AllocBuffer(stmt.buffer, annotations=annotations)
            return stmt

        return (tvm_ffi.structural_map(loop, [(tirx.AllocBuffer, on_alloc)]) if annotated else loop), checks

    return before


def _leaves_of(alloc: Any, lets: Lets) -> Optional[list]:
    """The variables the checked size of ``alloc`` reads, or None for a constant size."""
    if constant_bytes(alloc.buffer) is not None:
        return None
    probe = ExactSize(lets, "probe")
    for extent in alloc.buffer.ty.shape:
        probe.evaluate(extent)
    return probe.leaves


def _tvm_workspace(buf: Any, elements: Optional[Any], live: list, lets: Lets) -> tuple:
    """``(statements allocating buf, the statement releasing it)`` through TVM's workspace API:
    ``elements`` of it (a checked run-time count), else the size of its constant extents; a
    ``RuntimeError`` after releasing the ``live`` workspaces when the allocation fails."""
    dtype = tvm.runtime.DataType(str(buf.ty.dtype))
    ptr = tirx.Var(f"{buf}_workspace", PointerType(PrimType(str(buf.ty.dtype)), "global"))
    alloc = tirx.call_intrin(
        ptr.ty, "tirx.TVMBackendAllocWorkspace", tirx.IntImm("int32", _CPU_DEVICE), tirx.IntImm("int32", 0),
        tirx.Cast("uint64", _checked_bytes(buf, elements)), tirx.IntImm("int32", dtype.type_code),
        tirx.IntImm("int32", dtype.bits),
    )
    failed = tirx.call_intrin("bool", "tirx.isnullptr", ptr)
    shape = [lets.expand(e) for e in buf.ty.shape]
    message = f"cannot allocate the workspace '{buf}' ({buf.ty.dtype} x {shape}): out of memory"
    give_up = _then_release(live, _failing_assert(tvm.ir.StringImm("RuntimeError"), [tvm.ir.StringImm(message)]))
    release = tirx.Evaluate(tirx.call_intrin(
        "int32", "tirx.TVMBackendFreeWorkspace", tirx.IntImm("int32", _CPU_DEVICE), tirx.IntImm("int32", 0), ptr))
    return [tirx.Bind(ptr, alloc), tirx.IfThenElse(failed, give_up, None), tirx.DeclBuffer(buf, data=ptr)], release


def _release_on_assert(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    """``func`` with the workspaces :func:`release_workspaces_on_assert` takes made explicit."""
    lets = Lets(func.body)
    narrow = _narrow_indexed(func.body)

    def allocate(stmt: Any, rest: list, live: list, top: bool, loops: int) -> Optional[tuple]:  # noqa: ARG001
        if not isinstance(stmt, tirx.AllocBuffer) or KEEP_ON_STACK in stmt.annotations:
            return None
        buf = stmt.buffer
        if _CHECKED_ELEMENTS in stmt.annotations:  # checked before its parallel loop
            return _tvm_workspace(buf, stmt.annotations[_CHECKED_ELEMENTS], live, lets)
        size = _run_time_size(stmt, lets, narrow)
        if size is not None:
            stmts, release = _tvm_workspace(buf, size.elements, live, lets)
            return [*_too_large(live, size), *stmts], release
        if not any(contains(s, (tirx.AssertStmt,)) for s in rest):
            return None  # a constant size: TVM's own pair is right when nothing in its scope can fail
        const = constant_bytes(buf)
        if _is_global_alloc(stmt) and const is not None and 0 < const < TVM_STACK_ALLOCA_BYTES:
            return None  # TVM keeps it on the stack (its own limit)
        return _tvm_workspace(buf, None, live, lets)

    def on_exit(stmt: Any, live: list) -> Any:
        if not isinstance(stmt, tirx.AssertStmt):
            return stmt
        # the condition may read a workspace: test it before releasing, then fail
        fail = _failing_assert(stmt.error_kind, list(stmt.message_parts))
        return tirx.IfThenElse(tirx.Not(stmt.condition), _then_release(live, fail), None)

    run_time_sized = any(constant_bytes(a.buffer) is None and KEEP_ON_STACK not in a.annotations
                         for a in collect(func.body, tirx.AllocBuffer))
    if not run_time_sized and not contains(func.body, (tirx.AssertStmt,)):
        return func
    body = _with_releases(func.body, [], True, allocate, on_exit, before_loop=_checks_before_parallel(lets, narrow))
    return func if body.same_as(func.body) else func.with_body(body)


def release_workspaces_on_assert(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` (a CPU runtime module's host module, after lowering/stack_buffers.py and before
    ``LowerTVMBuiltin``) with its workspaces of a run-time size, and those that enclose an
    assertion, allocated explicitly: the first of the size the kernel needs, checked
    (:func:`_run_time_size`; before the parallel loop holding it where it can be), the others
    released before the assertion fails (module docstring). Other functions and allocations,
    and those that stay on the stack, are unchanged."""
    return tirx.transform.prim_func_pass(_release_on_assert, opt_level=0, name="tl.ReleaseWorkspacesOnAssert")(mod)
