"""``T.loop_break()`` / ``break`` and ``continue``: checked against their loop, then TIR's statements.

The language emits ``call_extern("int32", "tl.loop_break", loc, spelling)`` statements
(:mod:`tilelang_core.language.tileops.loops`). :func:`lower_loop_breaks`, run by the frontend step
before anything rewrites a loop, finds the innermost loop around each one:

* a serial loop (``T.serial``, ``range``, ``T.Pipelined``, which is serial in this pipeline) or a
  ``while`` loop: the marker becomes ``T.break_loop()``, printed as ``break`` by the C, LLVM and
  CUDA code generators;
* anything else is a :class:`LoweringError` at the marker's line, because the break could not mean
  what it says: no loop at all; the block loop of ``T.Kernel`` (blocks are not iterations of one
  loop: they run in parallel, or as GPU blocks); a ``T.Parallel`` nest (iterations spread over
  threads); ``T.Persistent`` (lowered into a loop over waves of tiles); ``T.parallel``,
  ``T.vectorized``, ``T.unroll`` and thread-bound loops.

TVMScript's own ``T.break_loop()`` statement, written directly, gets the same checks (located at
the kernel's definition).

``continue`` emits a marker too (``LOOP_CONTINUE_CALL``), checked the same way except that on CPU
targets it may also end an iteration of a ``T.Parallel`` nest or a ``T.parallel`` loop (it skips
the rest of one iteration, which no other iteration sees). GPU targets spread a ``T.Parallel`` nest
over the block's threads, with no loop left or a strided one inside the enclosing loop: the
``continue`` ended the enclosing serial loop's iteration (skipping later statements and barriers
of only some threads) or did not compile, so it is refused there. It is refused in ``T.unroll`` and ``T.vectorized``
loops: TVM went on with a ``continue`` there, and an unrolled copy's ``continue`` skipped the rest
of the *enclosing* loop's iteration (every later copy: wrong values), LLVM's vectorizer dropped it
(the skipped lanes were written), and a ``T.unroll`` loop alone did not compile.

A ``T.unroll`` loop that is not unrolled here but stays a loop for the target's compiler (a run-time
extent, ``T.unroll(n)``, or more body copies than lowering/dynamic_unroll.py unrolls) is a serial
loop for ``break`` and ``continue``: it is marked as such a loop right here
(:func:`_kept_as_loops`), so that nothing later unrolls it. Before, ``continue`` there was refused
as if the loop were unrolled into copies.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.core import KERNEL_AXIS_KEY, PARALLEL_MARKER, PERSISTENT_MARKER
from ..language.tileops.loops import LOOP_BREAK_CALL, LOOP_CONTINUE_CALL
from .atomics import checked_map
from .markers import marker_args

__all__ = ["lower_loop_breaks"]

_KIND_REASON = {
    tirx.ForKind.PARALLEL: "a T.parallel loop, whose iterations run in parallel: no iteration can end the others",
    tirx.ForKind.VECTORIZED: "a T.vectorized loop, whose iterations are the lanes of one vector operation",
    tirx.ForKind.UNROLLED: "a T.unroll loop, which is unrolled into copies of its body: no loop is left to leave",
    tirx.ForKind.THREAD_BINDING: "a loop bound to GPU threads, whose iterations are threads running together",
}


def _break_of(stmt: Any, func_location: str) -> Optional[tuple]:
    """``(loc, spelling)`` of a break statement (marker or TVMScript's ``T.break_loop()``), else None."""
    if not isinstance(stmt, tirx.Evaluate) or not isinstance(stmt.value, tvm.ir.Call):
        return None
    if getattr(stmt.value.op, "name", "") == "tirx.break_loop":
        return func_location, "T.break_loop()"
    args = marker_args(stmt, LOOP_BREAK_CALL)
    if args is None:
        return None
    return args[0].value, args[1].value


def _continue_of(stmt: Any) -> Optional[tuple]:
    """``(loc, spelling)`` of a ``continue`` marker, else None."""
    args = marker_args(stmt, LOOP_CONTINUE_CALL)
    return None if args is None else (args[0].value, args[1].value)


def _nest_marker(stmt: Any) -> Optional[tuple]:
    """``(what, ndim)`` of a ``T.Parallel`` / ``T.Persistent`` marker statement, else None."""
    for name, what in ((PARALLEL_MARKER, "T.Parallel"), (PERSISTENT_MARKER, "T.Persistent")):
        args = marker_args(stmt, name)
        if args:
            ndim = getattr(args[0], "value", None)
            if isinstance(ndim, int):
                return what, ndim
    return None


_NEST_REASON = {
    "T.Parallel": "a T.Parallel loop, whose iterations are independent (spread over the block's threads on GPU "
    "targets): no iteration can end the others",
    "T.Persistent": "a T.Persistent loop, which lowering turns into a loop over waves of tiles (the break would "
    "end this worker's remaining waves, not one tile loop)",
}


_GPU_PARALLEL_REASON = ("a parallel loop, which GPU targets spread over the block's threads: no loop of it is left "
                        "in a thread, so the continue would end an iteration of the enclosing loop (or of none)")


def _runs_as_a_loop(loop: Any) -> bool:
    """Whether the ``T.unroll`` loop ``loop`` stays a loop that the target's compiler may unroll
    (a run-time extent, or more copies of its body than :data:`~.dynamic_unroll.MAX_UNROLLED_ITERATIONS`):
    the rule of :func:`~.dynamic_unroll.mark_dynamic_unrolls`."""
    from .dynamic_unroll import HINT_KEY, mark_dynamic_unrolls

    marked = mark_dynamic_unrolls(loop)
    return marked.kind == tirx.ForKind.SERIAL and HINT_KEY in (marked.annotations or {})


def _kept_as_loops(body: Any, loop_vars: list) -> Any:
    """``body`` with the ``T.unroll`` loops of ``loop_vars`` made serial loops marked as run-time
    unrolls now (:data:`~.dynamic_unroll.HINT_KEY`), so that no later step unrolls a loop whose
    iteration a break or continue ends (on GPU targets they print as ``#pragma unroll`` loops)."""
    from .dynamic_unroll import as_unroll_hint

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.UNROLLED or not any(loop.loop_var.same_as(v) for v in loop_vars):
            return loop
        return as_unroll_hint(loop)

    return tvm_ffi.structural_map(body, [(tirx.For, on_for)])


class _Checker:
    def __init__(self, func_location: str, gpu: bool = False) -> None:
        self.func_location = func_location
        self.gpu = gpu
        #: loop variables of the run-time T.unroll loops that a break or continue leaves or continues
        self.kept_loops: list = []

    def visit(self, stmt: Any, loops: tuple, nest: Optional[tuple] = None) -> None:
        if stmt is None:
            return
        if isinstance(stmt, tirx.SeqStmt):
            pending = None
            for s in stmt.seq:
                self.visit(s, loops, pending if isinstance(s, tirx.For) else None)
                pending = _nest_marker(s)
            return
        if isinstance(stmt, tirx.For):
            run_time_unroll = False
            if KERNEL_AXIS_KEY in stmt.annotations:
                reason = ("the block loop of T.Kernel: each block runs the kernel body once, so there is no loop of "
                          "the kernel body to leave")
            elif nest is not None:
                reason = _NEST_REASON[nest[0]]
            elif stmt.kind == tirx.ForKind.UNROLLED and _runs_as_a_loop(stmt):
                reason, run_time_unroll = None, True  # a loop at run time: left and continued as a serial one
            else:
                reason = _KIND_REASON.get(stmt.kind)
            # continue ends one iteration: fine where iterations are independent, not where none is left
            parallel = nest is not None and nest[0] == "T.Parallel" or stmt.kind == tirx.ForKind.PARALLEL
            if not parallel:
                continue_reason = reason
            elif self.gpu:
                continue_reason = _GPU_PARALLEL_REASON
            else:
                continue_reason = None
            inner = (nest[0], nest[1] - 1) if nest is not None and nest[1] > 1 else None
            self.visit(stmt.body, loops + ((reason, continue_reason, stmt.loop_var if run_time_unroll else None),),
                       inner)
            return
        if isinstance(stmt, tirx.While):
            self.visit(stmt.body, loops + ((None, None, None),))
            return
        if isinstance(stmt, tirx.IfThenElse):
            self.visit(stmt.then_case, loops)
            self.visit(stmt.else_case, loops)
            return
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            self.visit(body, loops)
            return
        found = _break_of(stmt, self.func_location)
        if found is not None:
            loc, spelling = found
            if not loops:
                raise LoweringError(
                    f"{loc}: {spelling} is not inside any loop; it leaves the innermost enclosing serial loop "
                    "(T.serial, range, T.Pipelined or while)"
                )
            if loops[-1][0] is not None:
                raise LoweringError(
                    f"{loc}: {spelling} would leave {loops[-1][0]}; it can leave a serial loop only (T.serial, range, "
                    "T.Pipelined or while): put one around the code to leave"
                )
            self._keep(loops[-1][2])
            return
        found = _continue_of(stmt)
        if found is None:
            return
        loc, spelling = found
        if not loops:
            raise LoweringError(f"{loc}: {spelling} is not inside any loop")
        if loops[-1][1] is not None:
            raise LoweringError(
                f"{loc}: {spelling} would end an iteration of {loops[-1][1]}; it can end an iteration of a serial "
                "loop (T.serial, range, T.Pipelined, while) only (on CPU targets T.Parallel and T.parallel too): put "
                "the rest of the body under an if instead (if not cond: ...)"
            )
        self._keep(loops[-1][2])

    def _keep(self, loop_var: Any) -> None:
        """Remember the run-time ``T.unroll`` loop of ``loop_var`` (None: another loop) as one to keep a loop."""
        if loop_var is not None and not any(loop_var.same_as(v) for v in self.kept_loops):
            self.kept_loops.append(loop_var)


def lower_loop_breaks(func: tirx.PrimFunc, func_location: str, gpu: bool = False) -> tirx.PrimFunc:
    """``func`` with its break markers checked and replaced by ``T.break_loop()`` (module docstring)."""
    found = []

    def on_break(stmt: Any) -> Any:
        if not found and (_break_of(stmt, func_location) is not None or _continue_of(stmt) is not None):
            found.append(stmt)
        return stmt

    tvm_ffi.structural_map(func.body, [(tirx.Evaluate, on_break)])
    if not found:
        return func
    checker = _Checker(func_location, gpu)
    checker.visit(func.body, ())
    body = _kept_as_loops(func.body, checker.kept_loops) if checker.kept_loops else func.body

    def on_evaluate(stmt: Any) -> Any:
        if marker_args(stmt, LOOP_BREAK_CALL) is not None:
            return tirx.Evaluate(tirx.break_loop(), stmt.span)
        if marker_args(stmt, LOOP_CONTINUE_CALL) is not None:
            return tirx.Evaluate(tirx.continue_loop(), stmt.span)
        return stmt

    return func.with_body(checked_map(body, [(tirx.Evaluate, on_evaluate)]))
