"""The threads of TVM's raw ``T.tvm_thread_allreduce`` given as ``T.get_thread_binding(d)`` names.

Kernels that write a block reduction with TVM's own intrinsic name the threads it reduces over
by the thread index, usually through a name: ``tk = T.get_thread_binding(1)`` and then
``T.tvm_thread_allreduce(T.uint32(1), acc[0], True, out[0], tk, dtype="handle")`` (upstream
TileLang's ``examples/gemv``). A name assigned in a kernel is a one-element local variable here
(``tk[0] = threadIdx.y``), and TVM's ``LowerThreadAllreduce`` accepts only the thread variable
itself, stopping with an internal check ("arg4 should be a VarNode or IntImmNode").

This pass, first among the GPU passes (``passes.py``), puts the thread variable in place of a
read of such a local variable: one stored exactly once, with a thread index (``threadIdx.*`` of
a ``T.launch_thread``/``T.Kernel``). Any other thread operand is a ``LoweringError`` at the
statement naming the operand and what it must be, instead of TVM's check.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from .atomics import checked_map

__all__ = ["ResolveAllreduceThreads"]

_ALLREDUCE = tvm.ir.Op.get("tirx.tvm_thread_allreduce")


def _thread_vars(body: Any) -> set:
    """The handles (``__chandle__()``) of the ``threadIdx.*`` launch variables under ``body``."""
    found: set = set()

    def visit(node: Any) -> None:
        if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx."):
            found.add(node.node.var.__chandle__())

    tvm_ffi.structural_walk(body, ((tirx.AttrStmt,), visit), order="pre")
    return found


def _single_stores(body: Any) -> dict:
    """``{buffer handle: stored value}`` of the one-element local buffers stored exactly once."""
    stores: dict = {}
    counts: dict = {}

    def visit(node: Any) -> None:
        buffer = node.buffer
        key = buffer.__chandle__()
        counts[key] = counts.get(key, 0) + 1
        if (len(buffer.shape) == 1 and isinstance(buffer.shape[0], tirx.IntImm) and int(buffer.shape[0]) == 1
                and str(buffer.scope()).startswith("local")):
            stores[key] = node.value

    tvm_ffi.structural_walk(body, ((tirx.BufferStore,), visit), order="pre")
    return {key: value for key, value in stores.items() if counts[key] == 1}


def _location(stmt: Any, fallback: str) -> str:
    from ..language.spans import span_to_location

    where = span_to_location(getattr(stmt, "span", None))
    return f"{where[0]}:{where[1]}" if where else fallback


def _rewrite(func: tirx.PrimFunc, mod: Any, ctx: Any) -> tirx.PrimFunc:  # noqa: ARG001
    if not _has_allreduce(func.body):
        return func
    threads = _thread_vars(func.body)
    single = _single_stores(func.body)
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "kernel"

    def resolve(arg: Any) -> Any:
        if isinstance(arg, tvm.ir.TensorLoad) and arg.source.__chandle__() in single:
            value = single[arg.source.__chandle__()]
            if isinstance(value, tirx.Var) and value.__chandle__() in threads:
                return value
        return arg

    def on_evaluate(stmt: Any) -> Any:
        call = stmt.value
        if not (isinstance(call, tvm.ir.Call) and call.op.same_as(_ALLREDUCE)):
            return stmt
        size = int(call.args[0].value) if isinstance(call.args[0], tirx.IntImm) else None
        if size is None:
            raise LoweringError(f"{_location(stmt, name)}: T.tvm_thread_allreduce: its first operand, the number of "
                                f"values reduced, must be a constant (T.uint32(1)); got {call.args[0]}")
        first_thread = 2 + 2 * size
        args = list(call.args)
        for i in range(first_thread, len(args)):
            args[i] = resolve(args[i])
            if not isinstance(args[i], (tirx.Var, tirx.IntImm)):
                raise LoweringError(
                    f"{_location(stmt, name)}: T.tvm_thread_allreduce: operand {i} ({call.args[i]}) names the threads "
                    "reduced over and must be a thread index: T.get_thread_binding(d), a name given it once "
                    "(tk = T.get_thread_binding(1)), or the variable of a T.launch_thread; got an expression")
        if all(a.same_as(b) for a, b in zip(args, call.args)):
            return stmt
        return tirx.Evaluate(tvm.ir.Call(call.op, args, ret_ty=call.ty), stmt.span)

    body = checked_map(func.body, [(tirx.Evaluate, on_evaluate)])
    return func if body.same_as(func.body) else func.with_body(body)


def _has_allreduce(body: Any) -> bool:
    """Whether ``body`` calls ``T.tvm_thread_allreduce`` (most kernels do not: nothing to do)."""
    found: list = []

    def visit(node: Any) -> None:
        if node.op.same_as(_ALLREDUCE):
            found.append(node)

    tvm_ffi.structural_walk(body, ((tvm.ir.Call,), visit), order="pre")
    return bool(found)


def ResolveAllreduceThreads() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The pass giving ``T.tvm_thread_allreduce`` its thread variables (module docstring)."""
    return tirx.transform.prim_func_pass(_rewrite, opt_level=0, name="tl.ResolveAllreduceThreads")
