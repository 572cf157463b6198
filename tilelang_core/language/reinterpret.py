"""``T.reinterpret``: the bits of a value read as another dtype, in either argument order.

TileLang orders the arguments like ``T.cast``, ``T.reinterpret(value, dtype)``; TVMScript's
``T.reinterpret`` takes ``(dtype, value)``. Kernels of both kinds work: the argument that is a
dtype (a string, ``T.uint32``, a ``tvm.DataType``) is the dtype.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

__all__ = ["reinterpret"]


def _is_dtype(value: Any) -> bool:
    import tvm

    return isinstance(value, (str, tvm.DataType))


def reinterpret(*args: Any, dtype: Any = None, value: Any = None, span: Any = None) -> Any:
    """``value``'s bits as ``dtype`` (same total width): ``T.reinterpret(x, T.uint32)``,
    ``T.reinterpret(x, dtype="handle")`` or ``T.reinterpret("uint32", x)``.

    :raises TypeError: not one value and one dtype.
    """
    given = [a for a in args]
    if dtype is not None:
        given.append(dtype)
    if value is not None:
        given.append(value)
    dtypes = [a for a in given if _is_dtype(a)]
    values = [a for a in given if not _is_dtype(a)]
    if dtype is not None and not _is_dtype(dtype):
        dtypes, values = [], []  # a dtype= that is not one: refused below
    if len(given) != 2 or len(dtypes) != 1 or len(values) != 1:
        shown = ", ".join(f"{type(a).__name__} {a!r}" for a in given)
        raise TypeError(f"T.reinterpret(value, dtype): expected one value and one dtype such as T.uint32, got {shown}")
    from .core import dtype_name

    return tirx.reinterpret(dtype_name(dtypes[0]), values[0], span=span)
