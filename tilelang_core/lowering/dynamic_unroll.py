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

Constant-extent unrolled loops are left to ``UnrollLoop`` as before, up to
:data:`MAX_UNROLLED_ITERATIONS` iterations; a longer one is a hint like a run-time extent (the
target's compiler unrolls it as far as it sees fit). ``T.unroll(1 << 20)`` made a million copies of
its body: minutes of lowering and of C compiling, 7 s of lowering for ``1 << 16``.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

#: Annotation of a run-time-extent loop that was asked to be unrolled.
HINT_KEY = "tl.unroll_hint"

#: The most iterations of one ``T.unroll`` loop copied out here (0.6 s of lowering for 8192 copies
#: of a one-line body); a longer loop is left to the target's compiler.
MAX_UNROLLED_ITERATIONS = 4096


def _with_kind(loop: Any, kind: Any, annotations: dict) -> Any:
    return tirx.For(loop.loop_var, loop.min, loop.extent, kind, loop.body, loop.thread_binding, annotations,
                    loop.step, loop.span)


def mark_dynamic_unrolls(body: Any) -> Any:
    """Unrolled loops with a non-constant extent, or of more than :data:`MAX_UNROLLED_ITERATIONS`,
    -> serial loops marked :data:`HINT_KEY`."""

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.UNROLLED:
            return loop
        if isinstance(loop.extent, tirx.IntImm) and int(loop.extent.value) <= MAX_UNROLLED_ITERATIONS:
            return loop
        annotations = dict(loop.annotations or {})
        annotations[HINT_KEY] = tirx.IntImm("int32", 1)
        return _with_kind(loop, tirx.ForKind.SERIAL, annotations)

    return tvm_ffi.structural_map(body, [(tirx.For, on_for)])


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
