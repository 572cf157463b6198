"""Variables and workspaces: ``T.alloc_var`` (a mutable scalar) and ``T.alloc_global``."""

from __future__ import annotations

from numbers import Number
from typing import Any, Optional, Sequence, Union

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ._common import OperandTypeError, cast, fail, is_float, number_constant, shape_text
from ..core import dtype_name
from ..macro_arguments import declare_variable

_VAR_SCOPES = {"local.var": "local", "local": "local", "shared": "shared", "shared.dyn": "shared"}


def _initial(op: str, value: Any, dtype: str) -> Any:
    if isinstance(value, bool):
        return cast(int(value), dtype)
    if isinstance(value, Number):
        if isinstance(value, float) and not is_float(dtype):
            fail(op, (dtype, value), f"dtype mismatch: the float initializer {value!r} does not fit {dtype}")
        if is_float(dtype):
            try:
                return tirx.FloatImm(dtype, float(value))
            except Exception:  # noqa: BLE001 - TVM refuses values outside the dtype's range
                fail(op, (dtype, value), f"the initializer {value!r} exceeds maximum of {dtype}")
        return number_constant(op, (dtype, value), int(value), dtype, "initializer")
    from ..operand_checks import check_scalar

    check_scalar(op, "init", value)  # a buffer or a region has a dtype too; TVM's BufferStore refused them
    vdtype = getattr(getattr(value, "ty", None), "dtype", None)
    if vdtype is None:
        fail(op, (dtype, value), f"init must be a number or a scalar expression, got {type(value).__name__}", OperandTypeError)
    return cast(value, dtype)


def alloc_var(dtype: Any, *args: Any, scope: str = "local.var", init: Any = None) -> Any:
    """A mutable scalar: ``x = T.alloc_var(T.int32, init=0)``, then ``x = x + 1`` stores into it.

    The result is the scalar's value in expressions (``A[i] = x * 2``); assigning to its name
    stores (TVMScript's rule for one-element buffers). Positional forms as TileLang:
    ``alloc_var(dtype, init)``, ``alloc_var(dtype, scope)``, ``alloc_var(dtype, init, scope)``.
    ``scope`` is ``"local.var"`` (default; per thread), ``"local"`` or ``"shared"``. Without
    ``init`` the value is undefined until assigned.

    :raises LoweringError: an unknown scope or an initializer that does not fit (``TypeError`` /
        ``ValueError`` subclasses, as TileLang raises).
    """
    op = "T.alloc_var"
    if len(args) > 2:
        fail(op, (dtype, *args), f"takes at most 3 positional arguments (dtype, init, scope), got {len(args) + 1}", OperandTypeError)
    if len(args) == 1:
        if isinstance(args[0], str) and init is None:
            scope = args[0]
        else:
            if init is not None:
                fail(op, (dtype, *args), "the initializer is given twice (positionally and as init=)", OperandTypeError)
            init = args[0]
    elif len(args) == 2:
        if init is not None:
            fail(op, (dtype, *args), "the initializer is given twice (positionally and as init=)", OperandTypeError)
        init, scope = args
    if not isinstance(scope, str) or scope not in _VAR_SCOPES:
        fail(op, (dtype,), f"scope must be one of {', '.join(_VAR_SCOPES)}, got {scope!r}", OperandTypeError)
    from ..operand_checks import check_dtype

    dt = check_dtype(op, dtype)
    value = None if init is None else _initial(op, init, dt)
    scalar = _B.alloc_scalar(dt, scope=_VAR_SCOPES[scope])
    load = getattr(scalar, "scalar", scalar)
    declare_variable(load.source)  # shared with a macro it is passed to (macro_arguments)
    if value is not None:
        _B.buffer_store(load.source, value, [0])
    return scalar


def alloc_global(shape: Union[Sequence[Any], Any], dtype: Any, scope: str = "global") -> Any:
    """A workspace buffer in global memory, allocated by the kernel's host code.

    Write it outside ``T.Kernel`` (at the start of the kernel function, also of an eager
    ``@tilelang.jit`` function); it lives for one call.
    CPU targets: a heap/stack workspace of the call. GPU targets: device memory allocated by the
    host code of runtime-module backends (tvm_ffi); backends that run only the device source
    refuse such kernels when lowering. Prefer passing a torch tensor as a parameter.
    """
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    if scope != "global":
        fail("T.alloc_global", (shape_text(shape), dtype), f"scope must be 'global', got {scope!r}")
    from tvm.script.ir_builder import base as _ir_builder

    if not _ir_builder.IRBuilder.is_in_scope():
        fail("T.alloc_global", (shape_text(shape), dtype),
             "called outside a kernel function; write it in the body of a T.prim_func (or of an eager @tilelang.jit "
             "function, before 'with T.Kernel')")
    from ..operand_checks import check_dtype, check_extents

    check_extents("T.alloc_global", shape)
    return _B.alloc_buffer(tuple(shape), check_dtype("T.alloc_global", dtype), scope="global")
