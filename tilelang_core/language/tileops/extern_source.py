"""``T.import_source(source)``: user C or CUDA code placed in the kernel's generated source.

``T.import_source(text)`` in a kernel body leaves a marker statement
(``call_extern("int32", IMPORT_SOURCE_CALL, text)``) that
:mod:`tilelang_core.lowering.imported_source` takes out of the kernel and puts in front of the
generated code: the C source on target ``c``, the CUDA source on ``cuda``. A kernel then calls
what ``text`` defines with ``T.call_extern`` (``T.access_ptr`` gives it pointers into buffers).
Several calls keep their order; the same text given twice is placed once. The text is part of the
kernel's TIR, so two kernels that differ only in it have different cache keys.
"""

from __future__ import annotations

from typing import Optional

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ._common import OperandTypeError, fail

__all__ = ["IMPORT_SOURCE_CALL", "import_source"]

#: Callee name of the marker statement.
IMPORT_SOURCE_CALL = "tl.import_source"


def import_source(source: Optional[str] = None) -> None:
    """Place ``source`` (C on target ``c``, CUDA C++ on ``cuda``) in the generated source before
    the kernel, for ``T.call_extern`` to call what it defines. ``None`` does nothing (as in
    TileLang). Target ``llvm`` has no C source and refuses it when the kernel is lowered."""
    if source is None:
        return
    if not isinstance(source, str):
        fail("T.import_source", (source,), f"source must be a str of C/CUDA code, got {type(source).__name__}",
             OperandTypeError)
    _B.evaluate(tirx.call_extern("int32", IMPORT_SOURCE_CALL, tvm.ir.StringImm(source)))
