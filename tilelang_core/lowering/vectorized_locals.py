"""Variables and local buffers declared inside a ``T.vectorized`` loop get one value per lane.

A kernel's variable (``i = bx * 512 + tx * 4 + k``) is a one-element ``local`` buffer in TVM
0.27's TIR, and TVM's ``VectorizeLoop`` does not vectorize allocations ("not yet implemented"): a
buffer declared inside the vectorized loop stayed one element for all lanes. The lanes' stores
went to the same element and the rest of the body ran once, with the last lane's value:
``for k in T.vectorized(4): i = base + k; Y[i] = X[i] * 3`` wrote one element of four, on CUDA
and on ``llvm``, without an error. Two rewrites mend it:

- :func:`InlineVectorizedScalars`, before ``FlattenBuffer``: a variable of the loop body assigned
  once, before its first use, with a value that calls nothing impure and reads only buffers the
  loop does not write (index arithmetic, the common case) is replaced by that value where it is read. Such a value is the
  same wherever it is evaluated, and the vectorizer then sees ``Y[base + k]`` as the contiguous
  vector access it is (``float4`` loads and stores on CUDA).
- :func:`ExpandVectorizedLocals`, after ``FlattenBuffer``: every other buffer of a constant size
  ``n`` declared inside a vectorized loop of ``L`` lanes (variables such as ``v = X[i]``, a
  ``T.alloc_local`` inside the loop) gets ``n * L`` elements, element ``e`` of lane ``k`` at
  ``e * L + k``. A buffer that the loop also uses other than by loads and stores (its address
  passed to a call) is left as it was.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

__all__ = ["ExpandVectorizedLocals", "InlineVectorizedScalars"]

_PURE_EFFECT = 1  # TVM's CallEffectKind: kExprAnnotation 0, kPure 1


def _constant(expr: Any) -> Optional[int]:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _is_pure(value: Any, body: Any) -> bool:
    """Whether ``value`` calls only pure operators and reads only buffers that ``body`` (the loop
    body) does nothing with but load: then it is the same wherever it is evaluated in ``body``."""
    impure: list = []

    def on_load(load):
        if not _only_loaded(body, load.source):
            impure.append(load)
        return load

    def on_call(call):
        op = call.op
        kind = op.get_attr("TCallEffectKind") if isinstance(op, tvm.ir.Op) else None
        if kind is None or int(kind) > _PURE_EFFECT:
            impure.append(call)
        return call

    tvm_ffi.structural_map(value, [(tvm.ir.TensorLoad, on_load), (tirx.Call, on_call)])
    return not impure


def _count(node: Any, buf: Any) -> tuple[int, int]:
    """(references, loads + stores + allocations) of the buffer ``buf`` in ``node``."""
    counts = [0, 0]

    def on_var(var):
        if var.same_as(buf):
            counts[0] += 1
        return var

    def on_access(access):
        source = access.source if isinstance(access, tvm.ir.TensorLoad) else access.buffer
        if source.same_as(buf):
            counts[1] += 1
        return access

    tvm_ffi.structural_map(node, [(tvm.ir.Var, on_var)])
    tvm_ffi.structural_map(node, [(tvm.ir.TensorLoad, on_access), (tirx.BufferStore, on_access),
                                  (tirx.AllocBuffer, on_access)])
    return counts[0], counts[1]


def _only_loaded(node: Any, buf: Any) -> bool:
    refs, accesses = _count(node, buf)
    stores: list = []

    def on_store(store):
        if store.buffer.same_as(buf):
            stores.append(store)
        return store

    tvm_ffi.structural_map(node, [(tirx.BufferStore, on_store)])
    return refs == accesses and not stores


def _with_body(loop: Any, body: Any) -> Any:
    return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding,
                    loop.annotations, loop.step)


def _single_pure_store(items: list, start: int, buf: Any, body: Any) -> Optional[int]:
    """Index of the statement assigning ``buf`` (allocated by ``items[start]``), when that is its
    first use, the value is pure and every later use only loads it."""
    for j in range(start + 1, len(items)):
        refs, _ = _count(items[j], buf)
        if refs == 0:
            continue
        store = items[j]
        if not (isinstance(store, tirx.BufferStore) and store.buffer.same_as(buf) and refs == 1):
            return None
        if not _is_pure(store.value, body) or not all(_only_loaded(x, buf) for x in items[j + 1:]):
            return None
        return j
    return None


def _inline_scalars(loop: Any) -> Any:
    """``loop`` (vectorized) with its variables of pure values replaced by the values."""
    if not isinstance(loop.body, tirx.SeqStmt):
        return loop
    items = list(loop.body.seq)
    changed = False
    i = 0
    while i < len(items):
        stmt = items[i]
        if isinstance(stmt, tirx.AllocBuffer) and [_constant(d) for d in stmt.buffer.ty.shape] in ([], [1]):
            j = _single_pure_store(items, i, stmt.buffer, loop.body)
            if j is not None:
                buf, value = stmt.buffer, items[j].value

                def on_load(load, buf=buf, value=value):
                    return value if load.source.same_as(buf) else load

                rest = [tvm_ffi.structural_map(x, [(tvm.ir.TensorLoad, on_load)]) for x in items[j + 1:]]
                items = items[:i] + items[i + 1:j] + rest
                changed = True
                continue
        i += 1
    if not changed:
        return loop
    return _with_body(loop, items[0] if len(items) == 1 else tirx.SeqStmt(items))


def _expand_locals(loop: Any) -> Any:
    """``loop`` (vectorized, flattened) with each buffer declared inside it widened by its lanes."""
    lanes = _constant(loop.extent)
    if lanes is None or lanes < 2:
        return loop
    allocs: list = []

    def on_alloc(stmt):
        shape = list(stmt.buffer.ty.shape)
        if len(shape) == 1 and _constant(shape[0]) is not None:
            allocs.append(stmt.buffer)
        return stmt

    tvm_ffi.structural_map(loop.body, [(tirx.AllocBuffer, on_alloc)])
    widened = []
    for old in allocs:
        refs, accesses = _count(loop.body, old)
        if refs != accesses:  # its address goes somewhere that would not see the lanes
            continue
        size = _constant(old.ty.shape[0]) * lanes
        widened.append((old, tirx.decl_buffer([size], old.dtype, name=str(old),
                                              scope=str(old.ty.storage_scope) or "global")))
    if not widened:
        return loop
    k = loop.loop_var

    def lookup(buf) -> Optional[Any]:
        for old, new in widened:
            if old.same_as(buf):
                return new
        return None

    def on_load(load):
        new = lookup(load.source)
        return load if new is None else tirx.BufferLoad(new, [load.indices[0] * lanes + k])

    def on_store(store):
        new = lookup(store.buffer)
        return store if new is None else tirx.BufferStore(new, store.value, [store.indices[0] * lanes + k])

    def on_alloc_new(stmt):
        new = lookup(stmt.buffer)
        return stmt if new is None else tirx.AllocBuffer(new, annotations=dict(stmt.annotations))

    return _with_body(loop, tvm_ffi.structural_map(
        loop.body, [(tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store), (tirx.AllocBuffer, on_alloc_new)]
    ))


def _loop_pass(rewrite, name: str) -> tvm.transform.Pass:
    def on_for(loop):
        return rewrite(loop) if loop.kind == tirx.ForKind.VECTORIZED else loop

    def transform(func, mod, ctx):  # noqa: ARG001
        body = tvm_ffi.structural_map(func.body, [(tirx.For, on_for)])
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name=name)


def InlineVectorizedScalars() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Variables of pure values inside vectorized loops replaced by their values (before ``FlattenBuffer``)."""
    return _loop_pass(_inline_scalars, "tl.InlineVectorizedScalars")


def ExpandVectorizedLocals() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Buffers declared inside vectorized loops get one copy per lane (after ``FlattenBuffer``)."""
    return _loop_pass(_expand_locals, "tl.ExpandVectorizedLocals")
