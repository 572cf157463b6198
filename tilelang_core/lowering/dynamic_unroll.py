"""``T.unroll`` / ``T.Unroll`` loops whose extent is known only at run time.

TVM's ``UnrollLoop`` pass unrolls every loop of kind *unrolled* and stops with "Cannot unroll
non-constant loop" when the extent is not a constant, so ``for k in T.unroll(n)`` over a dynamic
``n`` did not lower. Such a loop cannot be unrolled by the compiler here; it is a request the
target's own compiler may honour. :func:`unroll_loops` wraps ``UnrollLoop``:

- before it, a run-time-extent unrolled loop becomes a serial loop marked :data:`HINT_KEY`;
- after it, on GPU targets, the mark turns the loop back into kind *unrolled*, which TVM's CUDA
  code generator prints as ``#pragma unroll`` (nvcc unrolls by a factor of its choosing); on CPU
  targets it stays a plain loop (the C compiler and LLVM unroll loops at ``-O2``/``-O3`` by
  themselves).

Constant-extent unrolled loops are left to ``UnrollLoop`` as before while the copies of the body
they make stay within :data:`MAX_UNROLLED_ITERATIONS`, counted over a nest (``T.unroll(64)`` inside
``T.unroll(64)`` makes 4096 copies of the inner body); a loop past it is a hint like a run-time
extent (the target's compiler unrolls it as far as it sees fit), inner loops first kept unrolled.
``T.unroll(1 << 20)`` made a million copies of its body: minutes of lowering and of C compiling,
7 s of lowering for ``1 << 16``; two nested ``T.unroll(128)`` built for 162 s with GCC (91 s on
LLVM, 1.35 GB) when the limit applied to each loop alone.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

#: Annotation of a run-time-extent loop that was asked to be unrolled.
HINT_KEY = "tl.unroll_hint"

#: The most copies of a loop body that ``T.unroll`` loops make here, nested loops multiplied; a loop
#: that would make more is left to the target's compiler. GCC 12 at -O3 took 4 s to build 1024
#: copies of a one-line store and 24 s for 4096 (TVM's lowering: 0.6 s for 8192).
MAX_UNROLLED_ITERATIONS = 1024


def _with_kind(loop: Any, kind: Any, annotations: dict) -> Any:
    return tirx.For(loop.loop_var, loop.min, loop.extent, kind, loop.body, loop.thread_binding, annotations,
                    loop.step, loop.span)


def body_copies(stmt: Any) -> int:
    """How many copies of its statements ``stmt`` becomes once its constant-extent unrolled loops
    are unrolled (statements in sequence or in branches add up, an unrolled loop multiplies)."""
    if isinstance(stmt, tirx.SeqStmt):
        return max(1, sum(body_copies(s) for s in stmt.seq))
    if isinstance(stmt, tirx.IfThenElse):
        return body_copies(stmt.then_case) + (body_copies(stmt.else_case) if stmt.else_case is not None else 0)
    if isinstance(stmt, tirx.For):
        inner = body_copies(stmt.body)
        if stmt.kind == tirx.ForKind.UNROLLED and isinstance(stmt.extent, tirx.IntImm):
            return max(0, int(stmt.extent.value)) * inner
        return inner
    body = getattr(stmt, "body", None)
    return body_copies(body) if isinstance(body, tirx.Stmt) else 1


def mark_dynamic_unrolls(body: Any) -> Any:
    """Unrolled loops with a non-constant extent, or whose unrolling would make more than
    :data:`MAX_UNROLLED_ITERATIONS` copies of their body's statements (:func:`body_copies`, inner
    loops decided first) -> serial loops marked :data:`HINT_KEY`."""

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.UNROLLED:
            return loop
        if isinstance(loop.extent, tirx.IntImm) and body_copies(loop) <= MAX_UNROLLED_ITERATIONS:
            return loop
        return as_unroll_hint(loop)

    return tvm_ffi.structural_map(body, [(tirx.For, on_for)])


def as_unroll_hint(loop: Any) -> Any:
    """The unrolled loop ``loop`` as a serial loop marked :data:`HINT_KEY`: a request the target's
    compiler may honour, which no later step here unrolls."""
    annotations = dict(loop.annotations or {})
    annotations[HINT_KEY] = tirx.IntImm("int32", 1)
    return _with_kind(loop, tirx.ForKind.SERIAL, annotations)


def clear_unroll_hints(body: Any, unrolled: bool) -> Any:
    """Loops marked :data:`HINT_KEY` lose the mark; ``unrolled``: they become kind *unrolled*
    again (GPU targets), else they stay serial (CPU targets)."""

    def on_for(loop: Any) -> Any:
        if loop.annotations is None or HINT_KEY not in loop.annotations:
            return loop
        annotations = {k: v for k, v in loop.annotations.items() if k != HINT_KEY}
        return _with_kind(loop, tirx.ForKind.UNROLLED if unrolled else loop.kind, annotations)

    return tvm_ffi.structural_map(body, [(tirx.For, on_for)])


def _body_pass(fn, name: str) -> tvm.transform.Pass:
    def transform(func, mod, ctx):  # noqa: ARG001
        body = fn(func.body)
        return func if body.same_as(func.body) else func.with_body(body)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name=name)


def unroll_loops(gpu: bool) -> tvm.transform.Pass:
    """TVM's ``UnrollLoop`` that accepts run-time extents (module docstring); ``gpu``: keep them
    as ``#pragma unroll`` hints."""
    return tvm.transform.Sequential(
        [
            _body_pass(mark_dynamic_unrolls, "tl.MarkDynamicUnrolls"),
            tirx.transform.UnrollLoop(),
            _body_pass(lambda body: clear_unroll_hints(body, gpu), "tl.ClearUnrollHints"),
        ],
        name="tl.UnrollLoops",
    )
