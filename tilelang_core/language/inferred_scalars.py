"""A float stored into a scalar that ``s = 0`` made an integer: refused at the store.

``s = 0`` (or ``n = i``, ``k = A_int[i]``) in a kernel body makes ``s`` a scalar variable typed by
its first value: ``int32`` here. In Python ``s += A[i]`` of a float ``A`` makes ``s`` a float; in
the kernel the sum is converted back to ``int32`` at every store, so ``s = 0; for i: s += A[i]``
gave 0 for eight 0.75s where Python gives 6.0. TVM printed only a C++ warning on stderr ("Casting
in BufferStore may lose precision"); upstream TileLang drops the loop body.

:func:`install` remembers each scalar that an assignment typed as an integer from its value, with
its name and line, and refuses a later store of a floating-point value into it: a
:class:`~tilelang_core.errors.LoweringError` at the store, naming the scalar, where it was typed,
both dtypes and what to write (``s = 0.0``, ``T.alloc_var``, or ``T.cast`` to truncate on purpose).
A scalar declared with its dtype (``s = T.alloc_var("int32")``) keeps TVM's conversion: the dtype
was written there on purpose.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_MARK = "_tilelang_checks_inferred_scalars"


def _dtype(value: Any) -> str:
    ty = getattr(value, "ty", None)
    return str(getattr(ty, "dtype", "")) if ty is not None else ""


def _is_integer(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


class _Typed:
    """What an assignment typed: the scalar's name, dtype and ``file:line``."""

    __slots__ = ("name", "dtype", "where")

    def __init__(self, name: str, dtype: str, where: str) -> None:
        self.name, self.dtype, self.where = name, dtype, where


def install() -> None:
    """Remember integer scalars typed by a value, and refuse float stores into them (idempotent)."""
    from tvm.ir import TensorLoad
    from tvm.tirx.script import builder
    from tvm.tirx.script.parser import parser as tirx_parser

    if getattr(builder.buffer_store, _MARK, False):
        return
    from .tileops._common import location
    from ..errors import LoweringError

    typed: dict[Any, _Typed] = {}  # scalar buffer -> how it was typed; kept per kernel parse

    bind = tirx_parser.bind_assign_value

    def bind_assign_value(self: Any, node: Any, var_name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        result = bind(self, node, var_name, value, *args, **kwargs)
        if isinstance(result, TensorLoad) and not isinstance(value, builder.scalar_wrapper):
            dtype = _dtype(result)
            if _is_integer(dtype) and not isinstance(value, bool):
                if len(typed) > 4096:  # one kernel never has that many; drop what earlier parses left
                    typed.clear()
                typed[result.source] = _Typed(var_name, dtype, location())
        return result

    bind_assign_value.__doc__ = bind.__doc__
    tirx_parser.bind_assign_value = bind_assign_value  # looked up by name on every assignment

    store = builder.buffer_store

    def buffer_store(buffer: Any, value: Any, indices: Any) -> Any:
        info = typed.get(buffer) if not isinstance(buffer, (int, float, str)) else None
        if info is not None:
            dtype = _dtype(getattr(value, "scalar", value)) or ("float32" if isinstance(value, float) else "")
            if _is_float(dtype):
                raise LoweringError(
                    f"{location()}: {info.name} = ...: {info.name} is an {info.dtype} scalar (its first value, "
                    f"at {info.where}, is an integer), and this value is {dtype}: it would be truncated to "
                    f"{info.dtype} at each store, where Python would make {info.name} a float. Start it as a "
                    f"float ({info.name} = 0.0, or {info.name} = T.alloc_var(\"{dtype}\") and then assign it), or "
                    f"write T.cast(value, \"{info.dtype}\") to truncate on purpose")
        return store(buffer, value, indices)

    buffer_store.__doc__ = store.__doc__
    setattr(buffer_store, _MARK, True)
    builder.buffer_store = buffer_store
