"""The value of an element store in a kernel (``B[i, j] = value``, ``v = value`` of a ``T.alloc_var``).

TVMScript hands the value to TVM's ``BufferStore`` as it is. A value that is not a scalar
expression stopped there with TVM's FFI signature ("Mismatched type on argument #1 when calling:
script.ir_builder.tirx.BufferStore(...). Expected `ir.Expr` but got `ir.TensorRegion`") for a
region (``B[0, 0] = A[0:4, 0]``), a buffer, a string or a tuple; ``None`` crashed the process
(a segmentation fault); and storing a region into a ``T.alloc_var`` was reported as "Variable v
already defined". :func:`install` wraps TVMScript's ``buffer_store`` so that such a value is a
:class:`~tilelang_core.errors.LoweringError` at the kernel's line naming the store, what was
given and what to write instead (index the buffer for one element, ``T.copy`` for a tile). A
Python float stored into a float64 buffer is a float64 constant (TVM range-checked it as float32);
one past float32's range stored into a float32 buffer is rounded as C rounds it (-FLT_MAX, inf).
"""

from __future__ import annotations

from numbers import Number
from typing import Any

__all__ = ["check_stored_value", "install"]

_MARK = "_tilelang_checks_stored_values"


def _index_text(index: Any) -> str:
    if isinstance(index, slice):
        return f"{'' if index.start is None else index.start}:{'' if index.stop is None else index.stop}"
    return str(index)


def _target_text(buffer: Any, indices: Any) -> str:
    name = getattr(buffer, "name", None) or "the buffer"
    if not isinstance(indices, (list, tuple)) and not hasattr(indices, "__len__"):
        indices = [indices]
    return f"{name}[{', '.join(_index_text(i) for i in indices)}]"


def check_stored_value(buffer: Any, indices: Any, value: Any) -> None:
    """Refuse a stored ``value`` that is not a number or a scalar expression (a region, a buffer,
    a string, ``None``, a tuple), naming the store ``buffer[indices]``."""
    from tvm import tirx

    from .expression_depth import check_store_depth
    from .operand_checks import _given, _is_region
    from .tileops._common import is_buffer, location
    from ..errors import LoweringError

    value = getattr(value, "scalar", value)  # T.alloc_var's wrapper
    if isinstance(value, Number) or (isinstance(value, tirx.Expr) and not is_buffer(value) and not _is_region(value)):
        check_store_depth(getattr(buffer, "name", None) or "the buffer", value, indices)  # before anything prints it
        _check_slice_store(buffer, indices, value)
        return
    if _is_region(value) or is_buffer(value):
        advice = ("index it for one element, or copy a tile with T.copy(source, destination) "
                  "(both regions or buffers of the same extents)")
    else:
        advice = "store a number or an expression of the kernel's values"
    raise LoweringError(
        f"{location()}: {_target_text(buffer, indices)} = ...: the stored value must be a scalar expression "
        f"(a number, an element A[i], a T.alloc_var), got {_given(value)}; {advice}")


def _slice_lanes(index: slice) -> Any:
    """The element count of a slice index (``0:4`` -> 4), None where it is not a constant."""
    from .tileops._common import static_int

    start, stop = static_int(index.start), static_int(index.stop)
    step = 1 if index.step is None else static_int(index.step)
    if None in (start, stop, step) or step < 1:
        return None
    return max(0, (stop - start + step - 1) // step)


def _check_slice_store(buffer: Any, indices: Any, value: Any) -> None:
    """Refuse an element store whose index is a slice (``B[0, 0:4] = 1.0``) and whose value is a
    single scalar: TVMScript makes it a vector store of 4 lanes, which TVM refused with
    "Incompatible types in BufferStore"; a slice without both ends (``B[0, :]``) crashed it."""
    from tvm import runtime

    from .operand_checks import _given
    from .tileops._common import location
    from ..errors import LoweringError

    if not isinstance(indices, (list, tuple)):
        indices = [indices]
    slices = [i for i in indices if isinstance(i, slice)]
    if not slices:
        return
    target = _target_text(buffer, indices)
    value_lanes = 1 if not hasattr(value, "ty") else runtime.DataType(str(value.ty.dtype)).lanes
    for index in slices:
        if index.start is None or index.stop is None:
            lanes = None
        else:
            lanes = _slice_lanes(index)
            if lanes is None or lanes == value_lanes or (lanes == 1 and value_lanes == 1):
                continue
        count = "its elements" if lanes is None else f"{lanes} elements"
        raise LoweringError(
            f"{location()}: {target} = ...: the index {_index_text(index)} is a slice, so this stores {count} at "
            f"once, but the value is a single element ({_given(value)}); fill them with "
            f"T.fill({target}, value), or store each element in a loop "
            f"(for i in T.Parallel(n): {getattr(buffer, 'name', 'B')}[..., i] = ...)")


_FLOAT32_MAX = 3.4028234663852886e38


def _float_literal(buffer: Any, value: Any) -> Any:
    """A Python float stored into a float64 buffer as a float64 constant: TVM made it a float32
    constant first, and ``B[0] = 1e300`` (or ``x = -1e300`` of a float64 ``T.alloc_var``) stopped
    with "Literal value 1e+300 exceeds maximum of float32". Into a float32 buffer, one past
    float32's range is rounded to float32 first, as C and torch store it: ``-3.4028235e38`` (how
    numpy prints float32's lowest value) is -FLT_MAX, ``1e39`` is inf (TVM refused both)."""
    if not isinstance(value, float):  # numpy's float64 too
        return value
    value = float(value)
    dtype = str(getattr(buffer, "dtype", ""))
    if dtype == "float64":
        from tvm import tirx

        return tirx.FloatImm("float64", value)
    if dtype == "float32" and abs(value) > _FLOAT32_MAX and value == value and abs(value) != float("inf"):
        from tvm import tirx

        from .dtypes import nearest_float32

        return tirx.FloatImm("float32", nearest_float32(value))
    return value


def install() -> None:
    """Wrap the ``buffer_store`` that TVMScript's parser calls (idempotent)."""
    from tvm.tirx.script import builder

    current = builder.buffer_store
    if getattr(current, _MARK, False):
        return

    def buffer_store(buffer: Any, value: Any, indices: Any) -> Any:
        check_stored_value(buffer, indices, value)
        return current(buffer, _float_literal(buffer, value), indices)

    buffer_store.__doc__ = current.__doc__
    setattr(buffer_store, _MARK, True)
    builder.buffer_store = buffer_store
