"""Kernels over raw addresses: pointer parameters (``T.ptr``) and tensors at an address (``T.make_tensor``).

TileLang kernels may take a device address instead of a tensor and view it as a tensor inside
the kernel::

    @T.prim_func
    def main(a: T.ptr, table: T.Tensor([G], T.ptr), m: T.int32):
        A = T.make_tensor(a, (m, 64), T.float16)             # a pointer parameter
        with T.Kernel(G) as bx:
            Src = T.make_tensor(table[bx], (64,), T.float16)  # an address read from a table

In the kernel's TIR a pointer parameter is a handle variable and each tensor made at an address
binds a typed pointer (``tirx.reinterpret`` of the address) and declares a buffer on it.
The lowering pipeline turns pointer parameters into int64 scalars that carry the address
(:mod:`tilelang_core.lowering.pointer_params`), so every backend passes them as it passes an
int64, and the core accepts a torch tensor there too (:func:`tilelang_core.calling.pointer_arguments`).
See docs/language.md, "Pointer parameters".
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional, Sequence

import tvm
from tvm import tirx
from tvm.ir import PointerType, PrimType
from tvm.tirx.script.builder import ir as _B

#: dtypes an address may have when ``T.make_tensor`` is given an integer value (``table[i]``).
ADDRESS_DTYPES = ("int64", "uint64")


def ptr(dtype: Any = None, storage_scope: str = "global", *, is_size_var: bool = False) -> Any:
    """A pointer: ``a: T.ptr`` (or ``T.ptr(T.float16)``) declares a pointer parameter.

    Written bare as a parameter annotation it is an untyped pointer; ``T.make_tensor(a, shape,
    dtype)`` gives it a shape and a dtype. Callers pass a torch tensor on the kernel's device (its
    ``data_ptr()`` is the address) or a Python int (an address, used as given). As the element
    type of a tensor annotation, ``T.Tensor([G], T.ptr)`` is a table of int64 addresses.

    :param dtype: element type the pointer addresses (None: untyped, ``void*``).
    :param storage_scope: storage scope of the memory it addresses.
    :param is_size_var: accepted for TileLang compatibility; it changes nothing for a pointer.
    """
    del is_size_var  # a pointer is never a size
    from .core import dtype_name

    return _B.handle(None if dtype is None else dtype_name(dtype), storage_scope)


def is_pointer_annotation(value: Any) -> bool:
    """Whether ``value`` is ``T.ptr`` itself (TileLang's element type of a table of addresses)."""
    if value is ptr:
        return True
    from tvm.script import tirx as tvm_script

    return value is getattr(tvm_script, "ptr", None)


def is_pointer(value: Any) -> bool:
    """Whether ``value`` is a pointer expression (a handle, such as a ``T.ptr`` parameter)."""
    return isinstance(getattr(value, "ty", None), PointerType)


def _fail(message: str, operands: Sequence[Any], error: Optional[type] = None) -> None:
    from .tileops._common import OperandTypeError, fail

    fail("T.make_tensor", operands, message, error or OperandTypeError)


def _address(ptr_value: Any, operands: Sequence[Any]) -> Any:
    """``ptr_value`` checked: a pointer expression, or an int64/uint64 value (an address)."""
    from .tileops._common import describe, is_buffer

    if is_buffer(ptr_value):
        _fail(f"operand 'ptr': expected a pointer (a T.ptr parameter) or an int64 address such as table[i], "
              f"got the tensor {describe(ptr_value)}; index it (table[i]) or pass the tensor itself", operands)
    if isinstance(ptr_value, bool) or not isinstance(ptr_value, tvm.ir.Expr):
        _fail(f"operand 'ptr': expected a pointer (a T.ptr parameter) or an int64 address such as table[i], "
              f"got {type(ptr_value).__name__} {ptr_value!r}", operands)
    if is_pointer(ptr_value):
        return ptr_value
    ty = getattr(ptr_value, "ty", None)
    dtype = str(ty.dtype) if isinstance(ty, PrimType) else str(ty)
    if dtype not in ADDRESS_DTYPES:
        _fail(f"operand 'ptr': expected a pointer (a T.ptr parameter) or an int64 address such as table[i], "
              f"got a {dtype} value", operands)
    return ptr_value


def _shape(shape: Any, operands: Sequence[Any]) -> list:
    """``shape`` as a list of int32/int64 expressions; ints must be >= 0."""
    dims = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if not dims:
        _fail("operand 'shape': expected one or more dimensions, got ()", operands)
    out = []
    for d in dims:
        if isinstance(d, Integral) and not isinstance(d, bool):
            if int(d) < 0:
                _fail(f"operand 'shape': expected sizes >= 0, got {int(d)}", operands, _value_error())
            out.append(int(d))
            continue
        ty = getattr(d, "ty", None)
        if isinstance(d, tvm.ir.Expr) and isinstance(ty, PrimType) and str(ty.dtype).startswith(("int", "uint")):
            out.append(d)
            continue
        _fail(f"operand 'shape': expected ints or integer expressions (m, n + 1), got {d!r} "
              f"({type(d).__name__})", operands)
    return out


def _reads_memory(expr: Any) -> bool:
    """Whether an expression loads from a buffer (``rows[g]``)."""
    if not isinstance(expr, tvm.ir.Expr):
        return False
    import tvm_ffi

    found = []

    def on_load(node: Any) -> Any:
        found.append(node)
        return node

    tvm_ffi.structural_map(expr, [(tvm.ir.TensorLoad, on_load)])
    return bool(found)


def _value_error() -> type:
    from .tileops._common import OperandCheckError

    return OperandCheckError


def make_tensor(ptr: Any, shape: Any, dtype: Any = "float32", strides: Optional[Sequence[Any]] = None) -> Any:
    """A tensor of ``shape`` and ``dtype`` at the address ``ptr``, inside a kernel.

    ``ptr`` is a pointer parameter (``a: T.ptr``) or an int64 address (``table[bx]`` of a
    ``T.Tensor([G], T.ptr)`` table, also read at a run-time index). ``shape`` entries are ints or
    integer expressions (scalar parameters such as ``m``); ``strides`` (in elements) default to
    the compact row-major layout. Reads and writes go straight to that memory: nothing checks
    that the address holds such a tensor. Write it in the kernel body, before or inside
    ``T.Kernel``.

    :raises LoweringError: (``OperandTypeError``) a ``ptr`` that is not a pointer or an int64
        value, a shape entry that is not an integer, a dtype that is not one; outside a kernel.
    """
    from tvm.script.ir_builder import IRBuilder

    from .core import dtype_name

    operands = (ptr, shape, dtype) if strides is None else (ptr, shape, dtype, strides)
    if not IRBuilder.is_in_scope():
        from ..errors import KernelDefinitionError

        raise KernelDefinitionError("T.make_tensor(ptr, shape, dtype) makes a tensor inside a kernel: call it in "
                                    "the body of a T.prim_func")
    address = _address(ptr, operands)
    dims = _shape(shape, operands)
    try:
        if is_pointer_annotation(dtype):
            raise TypeError("a pointer is not an element type here")
        name = dtype_name(dtype)
        tvm.runtime.DataType(name)
        if name in ("handle", "void") or not name:
            raise TypeError(name)
    except Exception:  # noqa: BLE001 - reported as the operand's error
        _fail(f"operand 'dtype': expected an element dtype such as T.float16 or 'float32', got {dtype!r}", operands)
    stride_list = None
    if strides is not None:
        stride_list = _shape(strides, operands)
        if len(stride_list) != len(dims):
            _fail(f"operand 'strides': expected {len(dims)} strides (one per dimension), got {len(stride_list)}",
                  operands, _value_error())
    # sizes that read memory (rows[g]) are read once, here: the tensor keeps the shape it was made with
    # (and TVM's StorageRewrite refuses a buffer whose declared shape loads from another buffer)
    dims = [_B.Bind(d) if _reads_memory(d) else d for d in dims]
    if stride_list is not None:
        stride_list = [_B.Bind(d) if _reads_memory(d) else d for d in stride_list]
    scope = address.ty.storage_scope if is_pointer(address) and address.ty.storage_scope else "global"
    typed = PointerType(PrimType(name), scope)
    data = _B.Bind(tirx.call_intrin(typed, "tirx.reinterpret", address), typed)
    return _B.decl_buffer(dims, name, data=data, strides=stride_list, scope=scope)


def make_tensor_from_addr(addr: Any, shape: Any, dtype: Any = "float32", strides: Optional[Sequence[Any]] = None,
                          storage_scope: str = "global") -> Any:
    """TileLang's spelling of :func:`make_tensor` for an integer address (``storage_scope``: only
    ``"global"``, the memory a pointer parameter or a table entry addresses)."""
    if storage_scope != "global":
        from .tileops._common import OperandTypeError, fail

        fail("T.make_tensor_from_addr", (addr, shape, dtype),
             f"operand 'storage_scope': expected 'global', got {storage_scope!r}", OperandTypeError)
    return make_tensor(addr, shape, dtype, strides)
