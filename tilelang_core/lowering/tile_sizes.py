"""Tile sizes once simplified: on-chip tiles of no element, and GPU tiles of a run-time size.

``T.alloc_local((bx,), ...)`` is checked when the kernel is defined (an integer expression is
legal: ``T.Kernel(4) as bx`` then ``(bx + 1,)``, or a ``T.dynamic`` size on CPU targets, where such
a tile comes from the heap). After simplification an extent can turn out to be a constant below 1
(``bx`` of a one-block grid is 0): C and CUDA code generation then stopped with TVM's
"Check failed: constant_size > 0 ... Can only handle constant size stack allocation for now",
and ``llvm`` compiled a zero-size tile whose every access is out of bounds. GPU targets have no
run-time sized local or shared arrays (registers and shared memory are sized when compiling):
CUDA code generation stopped with "Check failed: (dim_imm) is false" (dynamic shared memory,
scope ``"shared.dyn"``, is sized at launch and keeps a run-time size). :func:`CheckTileSizes`
runs after the first simplification and raises a :class:`LoweringError` naming the tile, its
allocation line, the extent as written and what to use instead. On GPU targets it also refuses a
``T.alloc_global`` inside ``T.Kernel`` (the threads of a GPU kernel cannot allocate global memory;
TVM stopped with "Cannot allocate global memory when targeting CUDA"); CPU targets give each block
its own workspace from the heap (lowering/workspaces.py).
"""

from __future__ import annotations

import linecache
from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.spans import get_buffer_span, span_to_location
from ..language.tileops._common import FRAGMENT_SCOPE, collect, scope_of

__all__ = ["CheckTileSizes", "tile_size_error"]

_ALLOCATORS = {"local": "T.alloc_local", "local.var": "T.alloc_var", "shared": "T.alloc_shared",
               "shared.dyn": "T.alloc_shared", FRAGMENT_SCOPE: "T.alloc_fragment"}


def _where(stmt: Any, buffer: Any) -> tuple[str, str]:
    """``file:line`` of the tile's allocation and the allocation as written there (``""`` when the
    source line cannot be read)."""
    for span in (get_buffer_span(buffer), getattr(stmt, "span", None)):
        where = span_to_location(span)
        if where:
            text = linecache.getline(where[0], where[1])
            start, end = int(getattr(span, "column", 0) or 0), int(getattr(span, "end_column", 0) or 0)
            written = text[start - 1:end - 1].strip() if 0 < start < end and "=" not in text[start - 1:end - 1] else ""
            written = written or text.strip().split("=", 1)[-1].strip()
            return f"{where[0]}:{where[1]}", written
    return "<unknown>", ""


def _shape_text(extents: list) -> str:
    return "(" + ", ".join(str(e) for e in extents) + ("," if len(extents) == 1 else "") + ")"


def tile_size_error(stmt: Any, buffer: Any, gpu: bool) -> Optional[str]:
    """The message for an on-chip tile whose (simplified) shape is not allowed, else None."""
    scope = scope_of(buffer)
    if scope not in _ALLOCATORS:
        return None
    extents = list(buffer.ty.shape)
    constants = [int(e) if isinstance(e, tirx.IntImm) else None for e in extents]
    empty = any(c is not None and c < 1 for c in constants)
    run_time = any(c is None for c in constants) and scope != "shared.dyn"  # sized at launch on CUDA
    if not empty and not (gpu and run_time):
        return None
    where, written = _where(stmt, buffer)
    op = _ALLOCATORS[scope]
    head = f"{where}: {op}: the tile '{buffer.name}'" + (f" ({written})" if written else "")
    if empty:
        return (f"{head} has the shape {_shape_text(extents)} once simplified, no element: every extent must be at "
                "least 1 (an extent that is 0 for every block, such as the block index of a one-block grid, "
                "gives an empty tile); give the tile a constant size")
    return (f"{head} has the shape {_shape_text(extents)}, known only at run time: on GPU targets local, fragment "
            "and shared tiles need sizes known at compile time (registers and shared memory are sized when the "
            "kernel is compiled); allocate a constant upper bound (the largest size the kernel needs) and use "
            "part of it; T.dynamic sizes are for the kernel's global tensors")


def _global_in_kernel_error(body: Any) -> Optional[str]:
    """The message for the first ``T.alloc_global`` inside a GPU kernel's ``T.Kernel``, else None."""
    for attr in collect(body, tirx.AttrStmt):
        if attr.attr_key != "thread_extent":
            continue
        for alloc in collect(attr.body, tirx.AllocBuffer):
            if scope_of(alloc.buffer) == "global":
                where, written = _where(alloc, alloc.buffer)
                return (f"{where}: T.alloc_global: the workspace '{alloc.buffer.name}'"
                        + (f" ({written})" if written else "")
                        + " is inside T.Kernel: on GPU targets the threads of a kernel cannot allocate global "
                        "memory; declare it before 'with T.Kernel(...)' in the prim_func (the host allocates it "
                        "for each call) or pass it to the kernel as a tensor parameter")
    return None


def CheckTileSizes(gpu: bool) -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Refuse on-chip tiles whose simplified shape has an extent below 1 (every target) or, with
    ``gpu``, an extent known only at run time (CPU targets take those from the heap), and, with
    ``gpu``, a ``T.alloc_global`` inside ``T.Kernel``."""

    def transform(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
        errors: list = []

        def visit(stmt: Any) -> None:
            message = tile_size_error(stmt, stmt.buffer, gpu)
            if message and not errors:
                errors.append(message)

        tvm_ffi.structural_walk(func.body, ((tirx.AllocBuffer,), visit), order="pre")
        in_kernel = _global_in_kernel_error(func.body) if gpu and not errors else None
        if in_kernel:
            errors.append(in_kernel)
        if errors:
            raise LoweringError(errors[0])
        return func

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.CheckTileSizes")
