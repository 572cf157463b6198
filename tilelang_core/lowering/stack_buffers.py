"""Local, shared and fragment buffers of CPU kernels become stack arrays.

On a CPU a kernel's ``local``, ``shared`` and fragment buffers are plain arrays of the thread
running the block. TVM's C code generator prints an allocation only in ``global`` scope, and
TVM 0.27's ``LowerTVMBuiltin`` keeps a CPU allocation on the stack only when it is in ``global``
scope and smaller than 1 KiB; every other one becomes a ``TVMBackendAllocWorkspace`` /
``TVMBackendFreeWorkspace`` pair where it is declared.

- The C entry point (target ``c``, consumer ``device_source``) turns every such buffer into a
  ``global``-scope one: :func:`stack_arrays` with no limit.
- Runtime modules (targets ``c`` and ``llvm``, consumer ``runtime_module``) turn those of a constant
  size under :data:`RUNTIME_STACK_LIMIT_BYTES` (1 KiB for ``c``, 64 KiB for ``llvm``) into ``global``-scope buffers marked for
  ``LowerTVMBuiltin`` to leave alone, so the code generator declares them as a stack array (C) or
  an ``alloca`` at function entry (LLVM): :func:`stack_small_buffers`. A kernel's scalar
  variables are declared inside its loops; before this, a 1M-element elementwise kernel with one
  local variable called TVM's workspace allocator a million times and ran two orders of magnitude
  slower on the tvm_ffi backend than the same kernel's C entry point. Larger or dynamically sized
  buffers stay in TVM's workspace pool.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

__all__ = ["C_STACK_LIMIT_BYTES", "KEEP_ON_STACK", "RUNTIME_STACK_LIMIT_BYTES", "STACK_TOTAL_BYTES",
           "TVM_STACK_ALLOCA_BYTES", "constant_bytes", "stack_arrays", "stack_small_buffers"]

#: TVM's own limit (bytes) under which ``LowerTVMBuiltin`` keeps an unmarked ``global`` CPU buffer
#: on the stack (``kMaxStackAlloca``).
TVM_STACK_ALLOCA_BYTES = 1024

#: A block-level local buffer of the C entry of at least this many bytes comes from the heap
#: (lowering/workspaces.py): on the stack of the thread running the block it could overflow it (a
#: 16 MB local was a segfault).
C_STACK_LIMIT_BYTES = 64 * 1024

#: Allocations of runtime modules smaller than this (bytes) live on the stack: TVM's own limit for
#: target ``c``; for ``llvm`` the C entry's limit. With TVM's 1 KiB there, a 32 x 32 float32 tile
#: came from TVM's workspace pool, an opaque pointer: LLVM could not tell the tiles of an
#: elementwise kernel apart and kept its loops scalar (2048 x 2048 add through shared/fragment
#: tiles on tvm_ffi/llvm: 27 ms; 10 ms as allocas). On target ``c`` the larger limit measured no
#: faster.
RUNTIME_STACK_LIMIT_BYTES = {"c": TVM_STACK_ALLOCA_BYTES, "llvm": C_STACK_LIMIT_BYTES}

#: The stack arrays of one function (the C entry's, or a runtime module's) add up to at most this
#: many bytes; the next buffers come from the heap (C entry) or TVM's workspace pool: 140 tiles of
#: 60 KiB each made 8.2 MiB of stack arrays, a segfault, and twenty of them one in a thread started
#: with 512 KiB of stack.
STACK_TOTAL_BYTES = 256 * 1024

#: The annotation through which ``LowerTVMBuiltin`` leaves an allocation to the code generator.
KEEP_ON_STACK = "disable_lower_builtin"


def constant_bytes(buffer: Any) -> Optional[int]:
    """The size of ``buffer`` in bytes when its shape is constant, else None."""
    dtype = tvm.runtime.DataType(str(buffer.ty.dtype))
    total = (dtype.bits * dtype.lanes + 7) // 8
    for dim in buffer.ty.shape:
        if not isinstance(dim, tirx.IntImm):
            return None
        total *= int(dim.value)
    return total


def _is_global(buffer: Any) -> bool:
    return str(buffer.ty.storage_scope) in ("", "global")


def stack_arrays(body: Any, limit_bytes: Optional[int] = None, total_bytes: Optional[int] = None) -> Any:
    """``body`` with its non-``global`` allocations in ``global`` scope (stack arrays for the code generators).

    With ``limit_bytes``, only allocations of a constant size under it change, and they are
    marked so that ``LowerTVMBuiltin`` keeps them on the stack; with ``total_bytes`` too, only
    while their sizes add up to at most that (the others stay in TVM's workspace pool).
    """
    moved: list = []
    used = [0]

    def on_alloc(stmt):
        buf = stmt.buffer
        if _is_global(buf):
            return stmt
        if limit_bytes is not None:
            size = constant_bytes(buf)
            if size is None or not 0 < size < limit_bytes:
                return stmt
            if total_bytes is not None:
                if used[0] + size > total_bytes:
                    return stmt
                used[0] += size
        moved.append(buf)
        return stmt

    tvm_ffi.structural_map(body, [(tirx.AllocBuffer, on_alloc)])
    if not moved:
        return body
    mapping = []
    for old in moved:
        ty = old.ty
        new = tirx.decl_buffer(
            list(ty.shape), old.dtype, name=str(old), strides=list(ty.strides) or None, scope="global"
        )
        mapping.append((old, new))

    def on_var(var):
        for old, new in mapping:
            if var.same_as(old):
                return new
        return var

    body = tvm_ffi.structural_map(body, [(tvm.ir.Var, on_var)])
    if limit_bytes is None:
        return body
    new_buffers = [new for _, new in mapping]

    def keep_on_stack(stmt):
        if not any(stmt.buffer.same_as(new) for new in new_buffers):
            return stmt
        annotations = dict(stmt.annotations)
        annotations[KEEP_ON_STACK] = tirx.IntImm("int32", 1)
        return tirx.AllocBuffer(stmt.buffer, annotations=annotations)

    return tvm_ffi.structural_map(body, [(tirx.AllocBuffer, keep_on_stack)])


def stack_small_buffers(mod: tvm.IRModule, language: str) -> tvm.IRModule:
    """``mod`` (a CPU runtime module's host module, before ``LowerTVMBuiltin``) with its small
    non-``global`` buffers on the stack (:func:`stack_arrays` with the
    :data:`RUNTIME_STACK_LIMIT_BYTES` of ``language``, ``"c"`` or ``"llvm"``)."""
    limit = RUNTIME_STACK_LIMIT_BYTES[language]

    def stack_small(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
        body = stack_arrays(func.body, limit, STACK_TOTAL_BYTES)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(stack_small, opt_level=0, name="tl.StackSmallBuffers")(mod)
