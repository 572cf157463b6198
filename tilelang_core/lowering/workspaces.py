"""Global workspaces (``T.alloc_global``) of the plain C entry point: heap, not stack.

TVM's C code generator can only print constant-size stack arrays, and a large workspace on the
stack of the calling thread can overflow it. In the C device source (target ``c``, consumer
``device_source``) every ``global``-scope allocation of the kernel becomes::

    T* W = tl_workspace_alloc(bytes);  if (W == NULL) return -2;
    ... the statements that follow the allocation ...
    tl_workspace_free(W);

The two helpers (``malloc``/``free``) come with the source through ``pragma_import_c``. TVM's
runtime-module paths allocate such buffers with ``TVMBackendAllocWorkspace`` themselves.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.ir import PointerType, PrimType

from .source_imports import c_definitions, with_import

#: Return code of the C entry point when a workspace cannot be allocated.
WORKSPACE_ALLOC_FAILED = -2

#: C element types as TVM's C code generator prints them (bfloat16 is stored as uint16_t).
_C_TYPES = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "half", "bfloat16": "uint16_t", "float32": "float", "float64": "double",
}


def _helpers(dtypes: list) -> str:
    def pair(dtype: str) -> str:
        t = _C_TYPES[dtype]
        return (
            f"static inline {t}* tl_workspace_alloc_{dtype}(int64_t bytes) {{ return ({t}*)malloc(bytes > 0 ? (size_t)bytes : 1); }}\n"
            f"static inline int32_t tl_workspace_free_{dtype}({t}* p) {{ free(p); return 0; }}\n"
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


def heap_workspaces(body: Any) -> Any:
    """``body`` with its top-level global-scope ``AllocBuffer``s on the heap (module docstring).

    Only allocations outside loops (where ``T.alloc_global`` belongs: before ``T.Kernel``) are
    moved; the ``return`` of a failed allocation could not leave an OpenMP loop.
    """
    found = []
    dtypes: list = []

    def walk(stmt):
        if isinstance(stmt, tirx.SeqStmt):
            return on_seq(tirx.SeqStmt([walk(s) if isinstance(s, (tirx.AttrStmt, tirx.SeqStmt)) else s for s in stmt.seq]))
        if isinstance(stmt, tirx.AttrStmt):
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, walk(stmt.body), stmt.span)
        return stmt

    def on_seq(seq):
        stmts = list(seq.seq)
        if not any(_is_global_alloc(s) for s in stmts):
            return seq
        found.append(seq)
        out: list = []
        frees: list = []
        for stmt in stmts:
            if not _is_global_alloc(stmt):
                out.append(stmt)
                continue
            buf = stmt.buffer
            dtype = str(buf.ty.dtype)
            if dtype not in _C_TYPES:
                out.append(stmt)  # a vector dtype: left to TVM (refused for target c anyway)
                continue
            dtypes.append(dtype)
            ptype = PointerType(PrimType(dtype), "global")
            ptr = tirx.Var(f"{buf}_heap", ptype)
            out.append(tirx.Bind(ptr, tirx.call_extern(ptype, f"tl_workspace_alloc_{dtype}", _bytes(buf))))
            failed = tirx.call_intrin("bool", "tirx.isnullptr", ptr)
            out.append(tirx.IfThenElse(failed, tirx.Return(tirx.IntImm("int32", WORKSPACE_ALLOC_FAILED)), None))
            out.append(tirx.DeclBuffer(buf, data=ptr))
            frees.append(tirx.Evaluate(tirx.call_extern("int32", f"tl_workspace_free_{dtype}", ptr)))
        return tirx.SeqStmt(out + list(reversed(frees)))

    body = walk(body)
    if not found:
        return body
    text = _helpers(sorted(set(dtypes)))
    return with_import(body, "pragma_import_c", text)
