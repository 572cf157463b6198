"""TVM names that TileLang code expects and TVM 0.27 spells differently.

Upstream TileLang ships its own patched TVM; code written against it (kernels, their tests)
uses a few names that the ``apache-tvm`` 0.27 installed here has moved or dropped:

* ``tvm.tirx.Call``, ``tvm.tirx.PrimExpr``, ``tvm.tirx.StringImm``: in TVM 0.27 these classes
  live in ``tvm.ir`` (``tvm.ir.Call``, ``tvm.ir.Expr``, ``tvm.ir.StringImm``);
* ``tvm.tirx.stmt_functor.post_order_visit`` / ``pre_order_visit``: TVM 0.27 walks IR with
  ``tvm_ffi.structural_walk`` instead;
* ``tvm.arith`` (``tvm.arith.Analyzer``): TVM 0.27 renamed the module ``tvm.sym``;
* ``prim_func.buffer_map`` (parameter -> buffer): in TVM 0.27 a tensor parameter *is* its
  buffer (a ``Var`` of ``BufferType``), so the map sends each such parameter to itself;
* ``expr.dtype`` on any scalar expression (``T.exp(x).dtype == "float32"``): TVM 0.27 keeps
  the type in ``expr.ty`` and has ``dtype`` only on buffers;
* ``isinstance(x, tirx.BufferLoad)`` / ``tirx.BufferRegion``: in TVM 0.27 these two names are
  constructor functions (of ``tvm.ir.TensorLoad`` / ``TensorRegion`` nodes), and ``isinstance``
  with a function raises ``TypeError``.

:func:`install` adds exactly these aliases, and only where TVM lacks the name; it never
replaces anything TVM defines, but for the two constructor functions, which become classes that
call the same function when called and answer ``isinstance`` for the nodes they build.
``import tilelang.language`` and ``tilelang.tvm`` call it.
See docs/compatibility.md ("TVM").
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable

import tvm
import tvm_ffi
from tvm import ir, tirx

__all__ = ["install", "post_order_visit", "pre_order_visit"]

_INSTALLED = False


def _ir_nodes() -> tuple[type, ...]:
    """The node classes TVM's statement functors visit: statements and expressions."""
    return (tirx.Stmt, ir.Expr)


def post_order_visit(node: Any, fvisit: Callable[[Any], Any]) -> None:
    """Call ``fvisit`` on every statement and expression under ``node``, children first.

    The walk is TVM 0.27's ``tvm_ffi.structural_walk``; the return value of ``fvisit`` is
    ignored.
    """

    def visit(n: Any) -> None:
        fvisit(n)

    tvm_ffi.structural_walk(node, (_ir_nodes(), visit), order="post")


def pre_order_visit(node: Any, fvisit: Callable[[Any], Any]) -> None:
    """Call ``fvisit`` on every statement and expression under ``node``, parents first.

    As with TVM's ``pre_order_visit``, a node for which ``fvisit`` returns ``False`` is not
    descended into.
    """

    def visit(n: Any) -> Any:
        if fvisit(n) is False:
            return tvm_ffi.structural.WalkResult.SKIP
        return None

    tvm_ffi.structural_walk(node, (_ir_nodes(), visit), order="pre")


def _expr_dtype(expr: Any) -> Any:
    """``expr.dtype`` for an expression: the dtype of its primitive type (``"handle"`` for pointers)."""
    ty = expr.ty
    dtype = getattr(ty, "dtype", None)
    if dtype is not None:
        return dtype
    if isinstance(ty, ir.PointerType):
        return tvm.DataType("handle")
    raise AttributeError(f"{type(expr).__name__} of type {ty} has no dtype")


def _install_dtype_properties() -> None:
    if not hasattr(ir.Expr, "dtype"):
        ir.Expr.dtype = property(_expr_dtype, doc="The dtype of this expression (``self.ty``'s dtype).")
    buffer_dtype = ir.Var.__dict__.get("dtype")
    if isinstance(buffer_dtype, property) and not getattr(buffer_dtype.fget, "_tilelang_scalar_fallback", False):
        buffer_getter = buffer_dtype.fget

        def var_dtype(var: Any) -> Any:
            try:
                return buffer_getter(var)  # a buffer: its element dtype, as TVM defines it
            except AttributeError:
                return _expr_dtype(var)  # a scalar variable: its own dtype

        var_dtype._tilelang_scalar_fallback = True  # type: ignore[attr-defined]
        ir.Var.dtype = property(var_dtype, doc=buffer_dtype.__doc__)


def _buffer_map(func: Any) -> dict:
    """``{param: buffer}`` of a PrimFunc: its buffer-typed parameters, each its own buffer."""
    from tvm.tirx.buffer import is_buffer_var

    return {p: p for p in func.params if is_buffer_var(p)}


def _stmt_functor_module() -> types.ModuleType:
    module = types.ModuleType(
        "tvm.tirx.stmt_functor",
        "TileLang's spelling of TVM's IR visitors, over TVM 0.27's structural walk "
        "(tilelang_core.language.tvm_names).",
    )
    module.post_order_visit = post_order_visit  # type: ignore[attr-defined]
    module.pre_order_visit = pre_order_visit  # type: ignore[attr-defined]
    return module


class _ConstructorClass(type):
    """The metaclass of :func:`_constructor_class`'s classes: calling one calls TVM's constructor
    function, ``isinstance`` asks for the node class that function builds."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._node)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._node)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._make(*args, **kwargs)


def _constructor_class(make: Callable[..., Any], node: type) -> type:
    """A class standing for TVM's constructor function ``make`` of ``node`` objects (module docstring)."""
    return _ConstructorClass(make.__name__, (), {"_make": staticmethod(make), "_node": node, "__doc__": make.__doc__,
                                                 "__module__": make.__module__})


def install() -> None:
    """Add the aliases listed in this module's docstring where TVM lacks them (idempotent)."""
    global _INSTALLED
    if _INSTALLED:
        return
    for name, value in (("Call", ir.Call), ("PrimExpr", ir.Expr), ("StringImm", ir.StringImm)):
        if not hasattr(tirx, name):
            setattr(tirx, name, value)
    if not hasattr(tirx, "stmt_functor") and "tvm.tirx.stmt_functor" not in sys.modules:
        module = _stmt_functor_module()
        sys.modules[module.__name__] = module
        tirx.stmt_functor = module  # type: ignore[attr-defined]
    if not hasattr(tvm, "arith") and "tvm.arith" not in sys.modules:
        sym = importlib.import_module("tvm.sym")
        sys.modules["tvm.arith"] = sym
        tvm.arith = sym  # type: ignore[attr-defined]
    if not hasattr(tirx.PrimFunc, "buffer_map"):
        tirx.PrimFunc.buffer_map = property(_buffer_map, doc="Tensor parameters, each mapped to itself (its buffer).")
    _install_dtype_properties()
    for name, node in (("BufferLoad", ir.TensorLoad), ("BufferRegion", ir.TensorRegion)):
        make = getattr(tirx, name, None)
        if make is not None and not isinstance(make, type):
            setattr(tirx, name, _constructor_class(make, node))
    _INSTALLED = True
