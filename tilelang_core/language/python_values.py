"""Python values assigned in kernels: ``dtype = "float16"``, ``op = T.max``, ``scan = None``.

In a kernel body TVMScript makes every assignment a TIR variable: a Python ``int``, ``float`` or
``bool`` becomes a scalar variable, an expression a bound value. Any other Python value (a
string or dtype, a function, ``None``, a dict, a torch dtype, ...) has no TIR type, and TVM 0.27
stops the parse with ``Cannot automatically inference the type``. TileLang kernels use such
names the way Python code does (``scan = T.cumsum if op == "cumsum" else T.cummax``, then
``scan(src=...)``), and TileLang's parser binds them as Python values, evaluated while the kernel
is parsed. :func:`install` does the same for TVMScript's ``tirx`` parser: such a value is bound to
its name as it is and no IR is emitted for it; a name holding a Python value may be assigned
another one in the same scope. Every value TVMScript knows how to bind (numbers, expressions,
buffers, frames, tuples of them, ...) keeps TVMScript's handling.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install", "kept_in_python"]

_INSTALLED = False


def kept_in_python(value: Any) -> bool:
    """Whether an assigned ``value`` is bound as a Python value: one TVMScript would pass to
    ``tvm.tirx.const``, which types only numbers and objects with a ``dtype``."""
    import tvm_ffi
    from tvm.script.ir_builder import ir as I
    from tvm.tirx.script import builder as T

    if isinstance(value, (bool, int, float, list, tuple)) or hasattr(value, "dtype"):
        return False
    if isinstance(value, str):  # strings and dtypes (T.float16 is a str): never a TIR value here
        return True
    if isinstance(value, (tvm_ffi.Object, T.scalar_wrapper, I.meta_var)):
        return False
    return not getattr(type(value), "_is_meta_class", False)


def install() -> None:
    """Bind Python values assigned in kernels as Python values (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm.tirx.script.parser import parser as tirx_parser

    original = tirx_parser.bind_assign_value

    def bind_assign_value(self: Any, node: Any, var_name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        if not kept_in_python(value):
            return original(self, node, var_name, value, *args, **kwargs)
        table = self.var_table
        if table.contains_in_current_frame(var_name) and kept_in_python(table.get().get(var_name)):
            # rebinding a Python value in its scope (pick = T.max ... pick = T.min): replace it, so
            # the parser's add() finds the same value and keeps it instead of "already defined"
            table.name2value[var_name][-1] = value
        return value

    bind_assign_value.__doc__ = original.__doc__
    tirx_parser.bind_assign_value = bind_assign_value  # looked up by name on every assignment
    _INSTALLED = True
