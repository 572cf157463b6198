"""``LowerAccessPtr``: ``tl.access_ptr`` (what ``T.access_ptr`` returns) -> TVM's ``tvm_access_ptr``.

``tl.access_ptr(A[i0, ..., ik], n, mask)`` becomes
``tvm_access_ptr(type_annotation(A.dtype), A.data, offset, n, mask)`` where ``offset`` is the
element offset of ``A[i0, ..., ik]`` from the start of ``A``'s data: ``A.elem_offset`` plus the
indices times ``A``'s strides (row-major strides of its shape when it has none). TVM's passes and
its C, LLVM and CUDA code generators know ``tvm_access_ptr``: they print ``A_data + offset``.

The pipeline runs it first in every pass list (:mod:`tilelang_core.lowering.passes`), after the
frontend step and, on GPU targets, after the fragment layout (which decides where a fragment
lives); ``tilelang.transform.LowerAccessPtr`` is the same pass for modules built by hand.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.registered_ops import ACCESS_PTR_OP, access_ptr_op

__all__ = ["LowerAccessPtr", "contains_access_ptr", "is_access_ptr", "lower_access_ptr"]


def is_access_ptr(expr: Any) -> bool:
    """Whether ``expr`` is a ``tl.access_ptr`` call."""
    return isinstance(expr, tvm.ir.Call) and getattr(expr.op, "name", "") == ACCESS_PTR_OP


def contains_access_ptr(node: Any) -> bool:
    """Whether ``node`` (a statement or expression) holds a ``tl.access_ptr`` call."""
    found: list = []

    def visit(call: Any) -> None:
        if is_access_ptr(call):
            found.append(call)

    tvm_ffi.structural_walk(node, ((tvm.ir.Call,), visit), order="pre")
    return bool(found)


def _index_dtype(values: list) -> str:
    for v in values:
        if isinstance(v, tvm.ir.Expr) and str(v.ty.dtype) == "int64":
            return "int64"
    return "int32"


def _as(value: Any, dtype: str) -> Any:
    if isinstance(value, int):
        return tirx.IntImm(dtype, value)
    return value if str(value.ty.dtype) == dtype else tirx.Cast(dtype, value)


def element_offset(buf: Any, indices: list) -> Any:
    """Element offset of ``buf[indices]`` from ``buf``'s data pointer, ``elem_offset`` included."""
    shape = list(buf.ty.shape)
    strides = list(buf.ty.strides)
    dtype = _index_dtype(list(indices) + shape + strides + [buf.elem_offset])
    if not strides:
        strides, step = [], tirx.IntImm(dtype, 1)
        for dim in reversed(shape):
            strides.insert(0, step)
            step = step * _as(dim, dtype)
    offset = _as(buf.elem_offset, dtype)
    for index, stride in zip(indices, strides):
        offset = offset + _as(index, dtype) * _as(stride, dtype)
    return tvm.sym.Analyzer().simplify(offset)


def _lower_call(call: Any) -> Any:
    first, extent, mask = call.args
    if type(first).__name__ != "TensorLoad":
        raise LoweringError(f"tl.access_ptr: the first argument must be a buffer element, got {first}")
    buf = first.source
    offset = element_offset(buf, list(first.indices))
    return tirx.call_intrin(
        "handle",
        tvm.ir.Op.get("tirx.tvm_access_ptr"),
        tirx.type_annotation(str(buf.ty.dtype)),
        buf.data,
        offset,
        _as(extent, str(offset.ty.dtype)),
        mask,
    )


def lower_access_ptr(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with every ``tl.access_ptr`` rewritten (the same object when it has none)."""
    access_ptr_op()  # the op exists before anything compares with it

    def on_call(call: Any) -> Any:
        return _lower_call(call) if is_access_ptr(call) else call

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.Call, on_call)])
    return func if body.same_as(func.body) else func.with_body(body)


def LowerAccessPtr() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The module pass: :func:`lower_access_ptr` on every PrimFunc."""

    def transform(func: Any, mod: Any, ctx: Any) -> Any:  # noqa: ARG001
        return lower_access_ptr(func)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.LowerAccessPtr")
