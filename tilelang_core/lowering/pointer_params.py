"""Pointer parameters and tensors at an address (``T.ptr``, ``T.make_tensor``), before anything else lowers.

Two rewrites, run first by :func:`tilelang_core.lowering.lower`:

- :func:`address_params`: every pointer parameter (``a: T.ptr``, a handle that no
  ``T.match_buffer`` turned into a tensor) becomes an int64 scalar of the same name that holds
  the address, and each use of the handle a ``tirx.reinterpret`` of it. So the artifact
  describes it as an int64 ``ScalarParam`` (with ``pointer`` set to the device family) and every
  backend passes it as it passes an int64; TVM's C, LLVM and CUDA code generators print the
  reinterpret as a pointer cast (``(float*)a``) or an ``inttoptr``.
- :func:`sink_address_tensors`: a tensor made before ``T.Kernel`` (a ``Bind`` of the typed pointer
  and the ``DeclBuffer`` on it, at the top of the function) is declared again at the top of the
  body of each ``T.Kernel`` that uses it. The pointer is then computed where it is used: in the
  device kernel on GPU targets (which receives the int64 address, not a host-made pointer the
  launch could not describe) and inside the outlined block loops of C entry points.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import PointerType

from ..language.core import KERNEL_AXIS_KEY
from .signature import is_tensor_param, param_name

#: dtype of the scalar that carries a pointer parameter's address.
ADDRESS_DTYPE = "int64"


def is_pointer_param(var: Any) -> bool:
    """Whether a PrimFunc parameter is a pointer (a handle that is not a tensor parameter)."""
    return not is_tensor_param(var) and isinstance(getattr(var, "ty", None), PointerType)


def _is_reinterpret(expr: Any) -> bool:
    return isinstance(expr, tvm.ir.Call) and getattr(expr.op, "name", "") == "tirx.reinterpret"


def address_params(func: tirx.PrimFunc) -> tuple[tirx.PrimFunc, set[int]]:
    """``(func, indices)``: ``func`` with its pointer parameters as int64 addresses; their indices."""
    mapping: list[tuple[Any, Any]] = []
    params = []
    for var in func.params:
        if is_pointer_param(var):
            new = tirx.Var(param_name(var), ADDRESS_DTYPE)
            mapping.append((var, new))
            params.append(new)
        else:
            params.append(var)
    if not mapping:
        return func, set()

    def on_var(v: Any) -> Any:
        for old, new in mapping:
            if v.same_as(old):
                return tirx.call_intrin(old.ty, "tirx.reinterpret", new)
        return v

    def on_call(call: Any) -> Any:
        # reinterpret(T*, reinterpret(void*, address)) -> reinterpret(T*, address)
        if _is_reinterpret(call) and isinstance(call.ty, PointerType):
            inner = call.args[0]
            if _is_reinterpret(inner) and isinstance(inner.ty, PointerType):
                return tirx.call_intrin(call.ty, "tirx.reinterpret", inner.args[0])
        return call

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.Var, on_var), (tvm.ir.Call, on_call)])
    indices = {i for i, var in enumerate(func.params) if is_pointer_param(var)}
    return tirx.PrimFunc(params, body, func.ret_type, func.attrs, func.span), indices


def _flatten(stmt: Any) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        out = []
        for s in stmt.seq:
            out.extend(_flatten(s))
        return out
    return [stmt]


def _is_address_bind(stmt: Any) -> bool:
    return (isinstance(stmt, tirx.Bind) and isinstance(getattr(stmt.var, "ty", None), PointerType)
            and _is_reinterpret(stmt.value))


def _vars_in(node: Any) -> list:
    found: list = []

    def on_var(v: Any) -> Any:
        found.append(v)
        return v

    tvm_ffi.structural_map(node, [(tvm.ir.Var, on_var)])
    return found


def _uses(node: Any, var: Any) -> bool:
    return any(v.same_as(var) for v in _vars_in(node))


def sink_address_tensors(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the tensors made at an address before ``T.Kernel`` declared in each kernel
    that uses them (see the module docstring); tensors also used outside every kernel stay."""
    top = _flatten(func.body)
    moved: list = []
    moved_vars: list = []
    for stmt in top:
        if _is_address_bind(stmt):
            moved.append(stmt)
            moved_vars.append(stmt.var)
        elif isinstance(stmt, tirx.DeclBuffer) and any(stmt.data.same_as(v) for v in moved_vars):
            moved.append(stmt)
    if not moved:
        return func
    # the scalars their shapes read (T.make_tensor binds a size such as rows[0] first) go with them
    for stmt in reversed(top):
        if isinstance(stmt, tirx.Bind) and not any(stmt.same_as(m) for m in moved):
            if any(_uses(m, stmt.var) for m in moved if not isinstance(m, tirx.DeclBuffer)) or any(
                    _uses(e, stmt.var) for m in moved if isinstance(m, tirx.DeclBuffer)
                    for e in list(m.buffer.ty.shape) + list(m.buffer.ty.strides)):
                moved.append(stmt)
    moved = [s for s in top if any(s.same_as(m) for m in moved)]  # in their order
    rest = [s for s in top if not any(s.same_as(m) for m in moved)]
    # a tensor used outside every kernel stays where it is (and so does its pointer)
    outside = [s for s in rest if not (isinstance(s, tirx.For) and KERNEL_AXIS_KEY in s.annotations)]
    kept = []
    for stmt in moved:
        var = stmt.var if isinstance(stmt, tirx.Bind) else stmt.buffer
        if any(_uses(s, var) for s in outside):
            kept.append(stmt)
    if kept:
        return func
    seen = [0]

    def needed(body: Any) -> list:
        """The moved statements ``body`` needs, in their order."""
        want = list(_vars_in(body))
        chosen = []
        for stmt in reversed(moved):
            var = stmt.var if isinstance(stmt, tirx.Bind) else stmt.buffer
            if not any(var.same_as(w) for w in want):
                continue
            chosen.append(stmt)
            want.extend(_vars_in(stmt.value if isinstance(stmt, tirx.Bind) else stmt.data))
            if isinstance(stmt, tirx.DeclBuffer):
                ty = stmt.buffer.ty
                for e in list(ty.shape) + list(ty.strides):
                    want.extend(_vars_in(e))
        return list(reversed(chosen))

    def on_for(loop: Any) -> Any:
        if KERNEL_AXIS_KEY not in loop.annotations:
            return loop
        if isinstance(loop.body, tirx.For) and KERNEL_AXIS_KEY in loop.body.annotations:
            return loop  # not the innermost grid loop of its kernel
        decls = needed(loop.body)
        if not decls:
            return loop
        body = loop.body
        if seen[0]:  # a later kernel: fresh variables (each is bound once in the function)
            decls, body = _fresh_copies(decls, body)
        seen[0] += 1
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, tirx.SeqStmt([*decls, body]),
                        loop.thread_binding, loop.annotations, loop.step, loop.span)

    body = tvm_ffi.structural_map(tirx.SeqStmt(rest) if len(rest) != 1 else rest[0], [(tirx.For, on_for)])
    return func.with_body(body)


def _fresh_copies(decls: list, body: Any) -> tuple[list, Any]:
    """``decls`` and ``body`` with every variable the declarations bind renamed to a new one.

    Buffers first, then scalars: the map rebuilds a node whose children changed before it calls
    the rule on it, so a buffer whose shape uses a renamed scalar would no longer be found."""
    from tvm.tirx import _ffi_api

    def renaming(mapping: list) -> list:
        def on_var(v: Any) -> Any:
            for old, new in mapping:
                if v.same_as(old):
                    return new
            return v

        return [(tvm.ir.Var, on_var)]

    scalars = [(s.var, tirx.Var(s.var.name, s.var.ty)) for s in decls if isinstance(s, tirx.Bind)]
    buffers = [(s.buffer, _ffi_api.BufferVar(s.buffer.name, tvm_ffi.structural_map(s.buffer.ty, renaming(scalars)),
                                             s.buffer.span)) for s in decls if isinstance(s, tirx.DeclBuffer)]
    for rules in (renaming(buffers), renaming(scalars)):
        decls = [tvm_ffi.structural_map(s, rules) for s in decls]
        body = tvm_ffi.structural_map(body, rules)
    return decls, body
