"""Helper text that lowering passes add to the generated source (TVM's ``pragma_import_*``).

TVM's C and CUDA code generators print the text of a ``pragma_import_c`` attribute before the
functions, and its LLVM generator links the IR of a ``pragma_import_llvm`` one. The atomics,
intrinsics, CPU math, exact-constant and workspace passes use these helpers to attach theirs.
"""

from __future__ import annotations

from typing import Any, Iterable

import tvm
import tvm_ffi
from tvm import tirx

__all__ = ["EXTERN_C_BEGIN", "EXTERN_C_END", "c_definitions", "with_import", "with_import_in_first_kernel"]

#: Opens an ``extern "C"`` block when the source is compiled as C++ (TVM's export of C runtime modules does).
EXTERN_C_BEGIN = '#ifdef __cplusplus\nextern "C" {\n#endif\n'
#: Closes :data:`EXTERN_C_BEGIN`.
EXTERN_C_END = "#ifdef __cplusplus\n}\n#endif\n"


def c_definitions(header: str, definitions: Iterable[str]) -> str:
    """``header`` (a comment, ``#include`` lines), then ``definitions`` with C linkage in C and C++."""
    return header + EXTERN_C_BEGIN + "".join(definitions) + EXTERN_C_END


def with_import(body: Any, key: str, text: str) -> Any:
    """``body`` under a ``key`` attribute (``"pragma_import_c"`` or ``"pragma_import_llvm"``) carrying ``text``."""
    return tirx.AttrStmt(tvm.ir.StringImm("default"), key, tvm.ir.StringImm(text), body)


def with_import_in_first_kernel(body: Any, text: str) -> tuple[Any, bool]:
    """``body`` with ``text`` imported (``pragma_import_c``) inside its first ``thread_extent``
    attribute, where a GPU device function starts; and whether there was one."""
    done = []

    def on_attr(stmt: Any) -> Any:
        if not done and stmt.attr_key == "thread_extent":
            done.append(stmt)
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, with_import(stmt.body, "pragma_import_c", text))
        return stmt

    return tvm_ffi.structural_map(body, [(tirx.AttrStmt, on_attr)], order="pre"), bool(done)
