"""Workspaces of CPU kernels, released on every way out of the kernel.

**C entry point** (target ``c``, consumer ``device_source``): TVM's C code generator can only
print constant-size stack arrays, and a large workspace on the stack of the calling thread can
overflow it, so every top-level ``global``-scope allocation (``T.alloc_global``) becomes::

    T* W = tl_workspace_alloc(bytes);  if (W == NULL) { <release the earlier ones>; return -2; }
    ... the statements that follow the allocation ...
    tl_workspace_free(W);

(:func:`heap_workspaces`). Every ``return`` among the statements that follow (a failed
``T.device_assert``, a failed block range, a later allocation that failed) first frees the
workspaces allocated so far. The two helpers (``malloc``/``free``) come with the source through
``pragma_import_c``.

**Runtime modules** (targets ``c`` and ``llvm``, consumer ``runtime_module``): TVM's
``LowerTVMBuiltin`` turns allocations into ``TVMBackendAllocWorkspace`` / ``...FreeWorkspace``
pairs, and a failing assertion (``T.device_assert``) returns between the two: each failing call
kept its workspaces, 4 MiB per call for a 1M-float ``T.alloc_global``.
:func:`release_workspaces_on_assert` makes the pair explicit for every allocation that encloses
such an assertion, and frees them before the assertion fails.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import tvm
from tvm import tirx
from tvm.ir import PointerType, PrimType

from .frontend import contains
from .source_imports import c_definitions, with_import
from .stack_buffers import KEEP_ON_STACK, RUNTIME_STACK_LIMIT_BYTES, constant_bytes

__all__ = ["WORKSPACE_ALLOC_FAILED", "heap_workspaces", "release_workspaces_on_assert"]

#: Return code of the C entry point when a workspace cannot be allocated.
WORKSPACE_ALLOC_FAILED = -2

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


def _bytes(buf: Any) -> Any:
    dtype = tvm.runtime.DataType(str(buf.ty.dtype))
    total: Any = tirx.IntImm("int64", (dtype.bits * dtype.lanes + 7) // 8)
    for extent in buf.ty.shape:
        total = total * tirx.Cast("int64", extent)
    return total


def _then_release(live: list, exit_stmt: Any) -> Any:
    """``exit_stmt`` preceded by the release of the ``live`` workspaces (innermost first)."""
    return tirx.SeqStmt(list(reversed(live)) + [exit_stmt]) if live else exit_stmt


# An allocation rule: (stmt, the statements after it in its sequence, live, top, loops) -> None
# (not an allocation it takes) or (statements replacing it, the statement releasing it).
_Allocate = Callable[[Any, list, list, bool, int], Optional[tuple]]


def _with_releases(stmt: Any, live: list, top: bool, allocate: _Allocate, on_exit: Callable[[Any, list], Any],
                   loops: int = 0) -> Any:
    """``stmt`` with the allocations ``allocate`` takes made explicit (released at the end of
    their sequence) and each exit statement rewritten by ``on_exit(stmt, live)``.

    ``live`` holds the release statements of the enclosing workspaces; ``top`` is True outside
    every loop and condition; ``loops`` counts the enclosing loops.
    """
    def again(s: Any, inner_top: bool = False, inner_loops: int = loops) -> Any:
        return _with_releases(s, live, top and inner_top, allocate, on_exit, inner_loops)

    if isinstance(stmt, tirx.SeqStmt):
        out: list = []
        mine: list = []
        items = list(stmt.seq)
        for k, item in enumerate(items):
            taken = allocate(item, items[k + 1:], live + mine, top, loops)
            if taken is None:
                out.append(_with_releases(item, live + mine, top, allocate, on_exit, loops))
                continue
            replacement, release = taken
            out.extend(replacement)
            mine.append(release)
        if not mine and len(out) == len(items) and all(a.same_as(b) for a, b in zip(out, items)):
            return stmt
        return tirx.SeqStmt(out + list(reversed(mine)))
    if isinstance(stmt, tirx.AttrStmt):
        body = again(stmt.body, inner_top=True)
        return stmt if body.same_as(stmt.body) else tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, body, stmt.span)
    if isinstance(stmt, tirx.For):
        body = again(stmt.body, inner_loops=loops + 1)
        if body.same_as(stmt.body):
            return stmt
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                        stmt.annotations, stmt.step, stmt.span)
    if isinstance(stmt, tirx.While):
        body = again(stmt.body, inner_loops=loops + 1)
        return stmt if body.same_as(stmt.body) else tirx.While(stmt.condition, body, stmt.span)
    if isinstance(stmt, tirx.IfThenElse):
        then = again(stmt.then_case)
        other = again(stmt.else_case) if stmt.else_case is not None else None
        if then.same_as(stmt.then_case) and (other is None or other.same_as(stmt.else_case)):
            return stmt
        return tirx.IfThenElse(stmt.condition, then, other, stmt.span)
    if live:
        return on_exit(stmt, live)
    return stmt


#: Local buffers of the C entry (``T.alloc_local``, ``T.alloc_shared``, ``T.alloc_fragment``: one
#: per block) of at least this many bytes, or whose size is known at call time only, are taken
#: from the heap too: on the stack of the thread running the block they could overflow it (a
#: 16 MB local was a segfault).
C_STACK_LIMIT_BYTES = 64 * 1024


def _large_local(stmt: Any, loops: int) -> bool:
    """A local allocation for the heap: large, and inside at most one loop (the block loop), not in
    an inner loop, whose ``#pragma omp simd`` the ``return`` of a failed allocation could not leave."""
    if loops > 1 or not isinstance(stmt, tirx.AllocBuffer) or _is_global_alloc(stmt) or KEEP_ON_STACK in stmt.annotations:
        return False
    size = constant_bytes(stmt.buffer)
    return size is None or size >= C_STACK_LIMIT_BYTES


def heap_workspaces(body: Any) -> Any:
    """``body`` (a plain C entry's) with its top-level global-scope ``AllocBuffer``s, and its
    large block-level local ones (:data:`C_STACK_LIMIT_BYTES`), on the heap, freed at the end of
    their scope and before every ``return`` in it (module docstring).

    Global allocations are moved only outside loops (where ``T.alloc_global`` belongs: before
    ``T.Kernel``); local ones inside the block loop at most. The ``return`` of a failed
    allocation leaves neither an OpenMP loop (block loops are outlined functions) nor a
    ``#pragma omp simd`` one.
    """
    dtypes: list = []

    def allocate(stmt: Any, rest: list, live: list, top: bool, loops: int) -> Optional[tuple]:  # noqa: ARG001
        if not ((top and _is_global_alloc(stmt)) or _large_local(stmt, loops)):
            return None
        buf = stmt.buffer
        dtype = str(buf.ty.dtype)
        if dtype not in _C_TYPES:
            return None  # a vector dtype: left to TVM (refused for target c anyway)
        dtypes.append(dtype)
        ptype = PointerType(PrimType(dtype), str(buf.ty.storage_scope) or "global")
        ptr = tirx.Var(f"{buf}_heap", ptype)
        failed = tirx.call_intrin("bool", "tirx.isnullptr", ptr)
        give_up = _then_release(live, tirx.Return(tirx.IntImm("int32", WORKSPACE_ALLOC_FAILED)))
        release = tirx.Evaluate(tirx.call_extern("int32", f"tl_workspace_free_{dtype}", ptr))
        return ([tirx.Bind(ptr, tirx.call_extern(ptype, f"tl_workspace_alloc_{dtype}", _bytes(buf))),
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


def _release_on_assert(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    def allocate(stmt: Any, rest: list, live: list, top: bool, loops: int) -> Optional[tuple]:  # noqa: ARG001
        if not isinstance(stmt, tirx.AllocBuffer) or KEEP_ON_STACK in stmt.annotations:
            return None
        if not any(contains(s, (tirx.AssertStmt,)) for s in rest):
            return None  # TVM's own pair is right when nothing in its scope can fail
        buf = stmt.buffer
        size = constant_bytes(buf)
        if _is_global_alloc(stmt) and size is not None and 0 < size < RUNTIME_STACK_LIMIT_BYTES:
            return None  # TVM keeps it on the stack (its own limit)
        dtype = tvm.runtime.DataType(str(buf.ty.dtype))
        ptr = tirx.Var(f"{buf}_workspace", PointerType(PrimType(str(buf.ty.dtype)), "global"))
        alloc = tirx.call_intrin(
            ptr.ty, "tirx.TVMBackendAllocWorkspace", tirx.IntImm("int32", _CPU_DEVICE), tirx.IntImm("int32", 0),
            tirx.Cast("uint64", _bytes(buf)), tirx.IntImm("int32", dtype.type_code), tirx.IntImm("int32", dtype.bits),
        )
        failed = tirx.call_intrin("bool", "tirx.isnullptr", ptr)
        message = f"cannot allocate the workspace '{buf}' ({buf.ty.dtype} x {list(buf.ty.shape)}): out of memory"
        give_up = _then_release(live, _failing_assert(tvm.ir.StringImm("RuntimeError"), [tvm.ir.StringImm(message)]))
        release = tirx.Evaluate(tirx.call_intrin(
            "int32", "tirx.TVMBackendFreeWorkspace", tirx.IntImm("int32", _CPU_DEVICE), tirx.IntImm("int32", 0), ptr))
        return ([tirx.Bind(ptr, alloc), tirx.IfThenElse(failed, give_up, None),
                 tirx.DeclBuffer(buf, data=ptr)], release)

    def on_exit(stmt: Any, live: list) -> Any:
        if not isinstance(stmt, tirx.AssertStmt):
            return stmt
        # the condition may read a workspace: test it before releasing, then fail
        fail = _failing_assert(stmt.error_kind, list(stmt.message_parts))
        return tirx.IfThenElse(tirx.Not(stmt.condition), _then_release(live, fail), None)

    if not contains(func.body, (tirx.AssertStmt,)):
        return func
    body = _with_releases(func.body, [], True, allocate, on_exit)
    return func if body.same_as(func.body) else func.with_body(body)


def release_workspaces_on_assert(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` (a CPU runtime module's host module, after lowering/stack_buffers.py and before
    ``LowerTVMBuiltin``) with the workspaces that enclose an assertion allocated explicitly and
    released before the assertion fails (module docstring). Functions without assertions, and
    allocations that stay on the stack, are unchanged."""
    return tirx.transform.prim_func_pass(_release_on_assert, opt_level=0, name="tl.ReleaseWorkspacesOnAssert")(mod)
