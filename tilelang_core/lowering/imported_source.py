"""``T.import_source``: the user's source text, taken out of the kernel and put in its generated source.

:func:`take_imported_sources` removes the marker statements of ``T.import_source``
(:mod:`tilelang_core.language.tileops.extern_source`) from a kernel and returns their texts in
kernel order, each distinct text once. :func:`import_for_target` then attaches them where the
target's code generator prints them before the functions (TVM's ``pragma_import_c``, see
:mod:`tilelang_core.lowering.source_imports`): around the C entry's body on ``c``, inside the first
kernel on GPU targets. Target ``llvm`` generates no C source and refuses them.

TVM's C code generator declares every function a kernel calls with ``T.call_extern``, typed by the
call's arguments (``void*`` for a ``T.access_ptr``): ``void* f(void*, void*, int32_t);``. Next to
the user's own definition (``static void f(float *dst, const float *src, int n)``) or a libc header
the text includes (``string.h``'s ``memcpy``) that is a C error. So in a kernel with imported source,
:func:`drop_declared_prototypes` removes TVM's declarations of the functions the kernel calls: the
imported text declares them (defines them, or includes their header). And a ``T.call_extern`` of
dtype ``handle`` used as a statement becomes a ``void`` call, since TVM prints it as
``((void*)f(...))``, which C and C++ refuse when ``f`` returns ``void``.
"""

from __future__ import annotations

from typing import Any

import re

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.tileops.extern_source import IMPORT_SOURCE_CALL
from .markers import extern_name, marker_args
from .source_imports import with_import, with_import_in_first_kernel

__all__ = ["drop_declared_prototypes", "extern_callees", "imported_text", "import_for_target", "take_imported_sources"]


def take_imported_sources(func: tirx.PrimFunc) -> tuple[tirx.PrimFunc, list[str]]:
    """``(func without T.import_source markers, their texts in order, duplicates dropped)``."""
    texts: list[str] = []

    def on_eval(stmt: Any) -> Any:
        args = marker_args(stmt, IMPORT_SOURCE_CALL, 1)
        if args is None:
            return stmt
        text = str(args[0].value)
        if text not in texts:
            texts.append(text)
        return tirx.Evaluate(tirx.IntImm("int32", 0))

    body = tvm_ffi.structural_map(func.body, [(tirx.Evaluate, on_eval)])
    return (func if not texts else func.with_body(body)), texts


def extern_callees(func: tirx.PrimFunc) -> set[str]:
    """Names of the functions ``func`` calls with ``T.call_extern``."""
    names: set[str] = set()

    def visit(call: Any) -> None:
        name = extern_name(call)
        if name is not None:
            names.add(name)

    tvm_ffi.structural_walk(func.body, ((tvm.ir.Call,), visit), order="pre")
    return names


def _void_statement_calls(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Statement calls ``T.call_extern("handle", f, ...)`` become ``void`` calls (a statement drops
    the value; TVM prints a ``handle`` call as ``((void*)f(...))``, an error when ``f`` returns ``void``)."""

    def on_eval(stmt: Any) -> Any:
        call = stmt.value
        name = extern_name(call)
        if name is None or not isinstance(call.ty, tvm.ir.PointerType):
            return stmt
        return tirx.Evaluate(tirx.call_extern("void", name, *call.args[1:]))

    body = tvm_ffi.structural_map(func.body, [(tirx.Evaluate, on_eval)])
    return func if body.same_as(func.body) else func.with_body(body)


def imported_text(texts: list[str]) -> str:
    """The texts joined as one block of source, each ending with a newline."""
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts)


def import_for_target(func: tirx.PrimFunc, texts: list[str], kind: str, location: str, name: str) -> tirx.PrimFunc:
    """``func`` (after the frontend step) carrying ``texts`` for target kind ``kind``.

    :raises LoweringError: ``kind`` generates no source the text could go in (``llvm``), or the
        GPU kernel has no thread launch to hold it.
    """
    if not texts:
        return func
    text = imported_text(texts)
    func = _void_statement_calls(func)
    if kind == "c":
        return func.with_body(with_import(func.body, "pragma_import_c", text))
    if kind == "llvm":
        raise LoweringError(
            f"{location}: kernel '{name}': T.import_source needs a target whose kernel is generated as C source; "
            "target 'llvm' compiles through LLVM IR, where the imported text has no place: use target 'c' "
            "(or 'cuda' for CUDA source)"
        )
    body, placed = with_import_in_first_kernel(func.body, text)
    if not placed:
        raise LoweringError(f"{location}: kernel '{name}': T.import_source found no kernel launch to put its source in")
    return func.with_body(body)


#: A forward declaration of TVM's C code generator: ``[TVM_DLL ]<type> <name>(<types>);``.
_PROTOTYPE = re.compile(r"^(?:TVM_DLL )?(?:[A-Za-z_]\w*[\s*]+)+([A-Za-z_]\w*)\(([^(){};]*)\);\s*$")
_GUARD = ["#ifdef __cplusplus", 'extern "C"', "#endif"]


def drop_declared_prototypes(source: str, texts: list[str], callees: set[str]) -> str:
    """``source`` (generated C) without TVM's forward declarations of ``callees`` (with the
    ``extern "C"`` guard before each) when the kernel imports ``texts``; else ``source`` itself."""
    if not texts or not callees:
        return source
    out: list[str] = []
    for line in source.split("\n"):
        match = _PROTOTYPE.match(line)
        if match and match.group(1) in callees:
            if out[-3:] == _GUARD:
                del out[-3:]
            continue
        out.append(line)
    return "\n".join(out)
