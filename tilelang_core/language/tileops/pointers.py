"""``T.access_ptr``: a typed pointer into a buffer, for ``T.call_extern`` and other raw-pointer calls.

``T.access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0)``
returns the expression ``tl.access_ptr(first, n, mask)`` (operator of
:mod:`tilelang_core.language.registered_ops`):

* ``first`` -- a ``BufferLoad`` of the first element the pointer points at: ``A[i, j]`` itself; the
  lower corner of a region ``A[a:b, c:d]`` (or of a vector index ``A[T.Ramp(...)]``); ``A[0, ..., 0]``
  for a whole buffer ``A``. ``offset`` (1-D buffers) moves it on; ``ignore_last_ndim=k`` sets its
  last ``k`` indices to 0.
* ``n`` -- how many elements the callee may touch: ``extent`` when given, else the product of
  ``extents`` (fewer extents than dimensions stand for the trailing ones), else 1 for an element,
  the region's size for a region and the buffer's size for a buffer.
* ``mask`` -- 1 for ``"r"``, 2 for ``"w"``, 3 for ``"rw"`` (or that int).

:mod:`tilelang_core.lowering.access_ptr` turns it into TVM's ``tvm_access_ptr`` (buffer data,
linear element offset including the buffer's ``elem_offset``, ``n``, ``mask``), which the C, LLVM
and CUDA code generators print as a pointer to the element.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional, Sequence

import tvm
from tvm import tirx

from ..registered_ops import access_ptr_op
from ._common import OperandTypeError, describe, fail, is_buffer, shape_text, static_int

__all__ = ["access_ptr"]

_OP = "T.access_ptr"
_MASKS = {"r": 1, "w": 2, "rw": 3}


def _index_dtype(buf: Any) -> str:
    shape = list(buf.ty.shape)
    return str(shape[0].ty.dtype) if shape and isinstance(shape[0], tvm.ir.Expr) else "int32"


def _as_expr(value: Any, dtype: str) -> Any:
    if isinstance(value, Integral) and not isinstance(value, bool):
        return tirx.IntImm(dtype, int(value))
    return getattr(value, "scalar", value)


def _mask(access_type: Any, operands: Sequence[Any]) -> int:
    if isinstance(access_type, str):
        if access_type not in _MASKS:
            fail(_OP, operands, f"access_type must be 'r', 'w' or 'rw' (or the mask 1, 2, 3), got {access_type!r}")
        return _MASKS[access_type]
    if isinstance(access_type, Integral) and not isinstance(access_type, bool):
        if int(access_type) not in (1, 2, 3):
            fail(_OP, operands, f"access_type as an int must be 1 (read), 2 (write) or 3 (read and write), got {int(access_type)}")
        return int(access_type)
    fail(_OP, operands, f"access_type must be a str ('r', 'w', 'rw') or an int mask, got {type(access_type).__name__} "
         f"{access_type!r}", OperandTypeError)
    raise AssertionError  # unreachable


def _base(base: Any, operands: Sequence[Any]) -> tuple[Any, list, Optional[list]]:
    """``(buffer, first element's indices, default extents or None for one element)``."""
    base = getattr(base, "scalar", base)  # T.alloc_var's wrapper: the variable's one element
    if is_buffer(base):
        shape = list(base.ty.shape)
        dtype = _index_dtype(base)
        return base, [tirx.IntImm(dtype, 0) for _ in shape], shape
    kind = type(base).__name__
    if kind == "TensorRegion":
        return base.source, [r.min for r in base.region], [r.extent for r in base.region]
    if kind == "TensorLoad":
        indices = list(base.indices)
        if any(type(i).__name__ == "Ramp" for i in indices):
            mins = [i.base if type(i).__name__ == "Ramp" else i for i in indices]
            lanes = [tirx.IntImm("int32", int(i.lanes)) if type(i).__name__ == "Ramp" else 1 for i in indices]
            for i in indices:
                if type(i).__name__ == "Ramp" and static_int(i.stride) != 1:
                    fail(_OP, operands, f"base {describe(base)}: a vector index must have stride 1, got {i.stride}")
            return base.source, mins, lanes
        return base.source, indices, None
    fail(
        _OP,
        operands,
        "base must be a buffer element (A[i, j]), a region (A[i:i + 4, j]) or a buffer (A), "
        f"got {kind} {describe(base)}",
        OperandTypeError,
    )
    raise AssertionError  # unreachable


def _product(values: Sequence[Any], dtype: str) -> Any:
    total: Any = None
    static = 1
    for v in values:
        s = static_int(v)
        if s is not None:
            static *= s
        else:
            total = v if total is None else total * v
    if total is None:
        return tirx.IntImm(dtype, static)
    if static != 1:
        total = total * tirx.IntImm(str(total.ty.dtype), static)
    return total


def _check_extent(value: Any, what: str, operands: Sequence[Any]) -> Any:
    value = getattr(value, "scalar", value)
    if isinstance(value, bool) or not (isinstance(value, Integral) or isinstance(value, tvm.ir.Expr)):
        fail(_OP, operands, f"{what} must be an int or an integer expression, got {type(value).__name__} {value!r}",
             OperandTypeError)
    if isinstance(value, tvm.ir.Expr) and not str(value.ty.dtype).startswith(("int", "uint")):
        fail(_OP, operands, f"{what} must be an integer, got {value} of dtype {value.ty.dtype}", OperandTypeError)
    s = static_int(value)
    if s is not None and s < 1:
        fail(_OP, operands, f"{what} must be at least 1, got {s}")
    return value


def _span(buf: Any) -> Optional[int]:
    """Elements from the first to one past the last element of ``buf`` when its layout is static."""
    shape = [static_int(d) for d in buf.ty.shape]
    if any(d is None for d in shape):
        return None
    strides = list(buf.ty.strides)
    if not strides:
        total = 1
        for d in shape:
            total *= d
        return total
    strides = [static_int(s) for s in strides]
    if any(s is None for s in strides) or any(d == 0 for d in shape):
        return None
    return 1 + sum((d - 1) * s for d, s in zip(shape, strides))


def _linear(buf: Any, indices: Sequence[Any]) -> Optional[int]:
    """The static element offset of ``indices`` from ``buf``'s first element, else None."""
    idx = [static_int(i) for i in indices]
    shape = [static_int(d) for d in buf.ty.shape]
    if any(v is None for v in idx + shape):
        return None
    strides = list(buf.ty.strides)
    if strides:
        strides = [static_int(s) for s in strides]
        if any(s is None for s in strides):
            return None
    else:
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d
    return sum(i * s for i, s in zip(idx, strides))


def _check_bounds(buf: Any, indices: Sequence[Any], extent: Any, operands: Sequence[Any]) -> None:
    for axis, (index, dim) in enumerate(zip(indices, buf.ty.shape)):
        i, d = static_int(index), static_int(dim)
        if i is not None and (i < 0 or (d is not None and i >= d)):
            fail(_OP, operands, f"index {i} of axis {axis} is outside buffer '{buf}' of shape {shape_text(buf.ty.shape)}")
    span, n = _span(buf), static_int(extent)
    if span is None or n is None:
        return
    start = _linear(buf, indices)
    if n > span or (start is not None and start + n > span):
        where = f"from element {start} " if start is not None else ""
        fail(
            _OP,
            operands,
            f"the pointer covers {n} elements {where}but buffer '{buf}' of shape {shape_text(buf.ty.shape)} "
            f"has {span - (start or 0)} there",
        )


def access_ptr(
    base: Any,
    access_type: Any = "r",
    *extents: Any,
    offset: Any = 0,
    extent: Any = None,
    ignore_last_ndim: int = 0,
) -> Any:
    """A pointer to ``base`` (an element ``A[i, j]``, a region ``A[a:b, c:d]`` or a buffer ``A``)
    covering ``extent`` (or the product of ``extents``) elements, for reading (``"r"``), writing
    (``"w"``) or both (``"rw"``); see the module docstring. Pass it to ``T.call_extern``.

    Every target: ``c`` and ``llvm`` (any buffer: tensors, ``T.alloc_shared``/``T.alloc_fragment``/
    ``T.alloc_local``) and GPU targets (a GPU fragment with a pointer to more than one element is
    placed in shared memory, where its elements are contiguous).
    """
    operands = (base, repr(access_type) if isinstance(access_type, str) else access_type, *extents)
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    mask = _mask(access_type, operands)
    buf, indices, default = _base(base, operands)
    ndim = len(indices)
    dtype = _index_dtype(buf)
    if isinstance(ignore_last_ndim, bool) or not isinstance(ignore_last_ndim, Integral) or not 0 <= ignore_last_ndim <= ndim:
        fail(_OP, operands, f"ignore_last_ndim must be an int from 0 to {ndim} (the buffer's rank), got {ignore_last_ndim!r}")
    if ignore_last_ndim:
        indices = indices[: ndim - ignore_last_ndim] + [tirx.IntImm(dtype, 0) for _ in range(ignore_last_ndim)]
    offset = getattr(offset, "scalar", offset)
    if isinstance(offset, bool) or not isinstance(offset, (Integral, tvm.ir.Expr)):
        fail(_OP, operands, f"offset must be an int or an integer expression, got {type(offset).__name__} {offset!r}",
             OperandTypeError)
    if static_int(offset) != 0:
        if ndim != 1:
            fail(_OP, operands, f"offset= moves the pointer of a 1-D buffer only; '{buf}' has {ndim} dimensions "
                 "(index the element instead: A[i, j + offset])")
        off = _as_expr(offset, str(indices[0].ty.dtype))
        indices = [indices[0] + off]
    if len(extents) > ndim:
        fail(_OP, operands, f"got {len(extents)} extents for buffer '{buf}' of rank {ndim}")
    if extent is not None:
        n = _as_expr(_check_extent(extent, "extent", operands), dtype)
    elif extents:
        checked = [_check_extent(e, f"extents[{k}]", operands) for k, e in enumerate(extents)]
        n = _product([_as_expr(e, dtype) for e in checked], dtype)
    elif default is not None:
        n = _product([_as_expr(e, dtype) for e in default], dtype)
    else:
        n = tirx.IntImm(dtype, 1)
    _check_bounds(buf, indices, n, operands)
    first = tirx.BufferLoad(buf, [_as_expr(i, dtype) for i in indices])
    return tirx.call_intrin("handle", access_ptr_op(), first, n, tirx.IntImm("int32", mask))
