"""``T.vectorized`` loops whose lanes meet in memory run as serial loops.

TVM's ``VectorizeLoop`` turns each statement of a vectorized loop into one vector operation: all
lanes read memory as it was before the statement, and a store that several lanes send to the same
element keeps one lane's value. That is the loop's meaning only when the lanes are independent.
``for j in T.vectorized(8): acc[0] = acc[0] + A[j]`` stored ``acc[0] + A[7]`` on ``llvm`` (8
where the loop as written sums to 36), without an error; the C target, whose vectorized loops are
serial, summed it. :func:`LaneCollisionsSerial` makes such a loop serial right before
``VectorizeLoop``, which keeps the meaning as written on every target (the C and LLVM compilers
may still vectorize the serial loop where the dependence allows). A vectorized loop collides when,
after ``FlattenBuffer`` (buffers declared inside the loop already have one copy per lane,
:mod:`.vectorized_locals`):

* a store goes to an element that is not different for each lane (its index is not
  ``c * j + base`` with ``c`` a non-zero constant and ``base`` free of ``j``), unless every lane
  stores the same value there (the value and the index read nothing the loop writes and use no
  variable of the loop); or
* a load reads a buffer the loop stores to where another lane stores (``A[j + 1] = A[j]``): its
  index and a store's are not the same, nor ``c * j + a`` and ``c * j + b`` whose difference
  ``a - b`` is no multiple of ``c`` below ``c`` times the lanes (each lane's own elements, as
  ``acc[j]`` and ``acc[j + 4]`` of a 4-lane loop's per-lane copies, never meet another lane's).

Loops the frontend vectorizes itself (copies, ``T.Parallel`` bodies) meet neither condition and
stay vectorized.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..language.tileops._common import collect, static_int
from .vector_lanes import serial_vectors_pass

__all__ = ["LaneCollisionsSerial", "lanes_collide"]


def _index(node: Any) -> Any:
    """The flat index of a store or load (its only index after ``FlattenBuffer``), else None."""
    indices = list(node.indices)
    return indices[0] if len(indices) == 1 else None


def _linear(index: Any, lane: Any) -> Optional[tuple]:
    """``(c, base)`` of an index ``c * lane + base`` with ``c`` a constant (``base`` free of the
    lane), else None."""
    if index is None:
        return None
    found = tvm.sym.detect_linear_equation(index, [lane])
    step = static_int(found[0]) if len(found) == 2 else None
    return None if step is None else (step, found[1])


def _bound_inside(body: Any) -> list:
    """The variables the loop body binds: inner loop variables, ``let`` variables, buffers declared in it."""
    bound: list = []
    for node in collect(body, (tirx.For, tirx.LetStmt, tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer)):
        bound.append(node.loop_var if isinstance(node, tirx.For) else
                     node.buffer if isinstance(node, (tirx.AllocBuffer, tirx.DeclBuffer)) else node.var)
    return bound


def _same_for_every_lane(expr: Any, lane_vars: list, stored: list) -> bool:
    """Whether ``expr`` uses no variable of the loop and reads no buffer the loop stores to."""
    if any(any(load.source.same_as(s) for s in stored) for load in collect(expr, tvm.ir.TensorLoad)):
        return False
    used = collect(expr, tvm.ir.Var)
    return not any(var.same_as(v) for var in used for v in lane_vars)


def _another_lanes(read: Any, write: Any, lanes: Optional[int], analyzer: Any) -> bool:
    """Whether a load at index ``read`` may read an element a store at index ``write`` writes for
    another lane; each is ``(index, _linear(index))``. Conservatively True where the indices are
    not both ``c * lane + base`` with the same ``c`` and bases a constant apart."""
    (read_index, read_form), (write_index, write_form) = read, write
    if read_index is not None and write_index is not None and tvm_ffi.structural_equal(read_index, write_index):
        return False
    if read_form is None or write_form is None or lanes is None:
        return True
    step = read_form[0]
    if step == 0 or step != write_form[0]:
        return True
    apart = static_int(analyzer.simplify(read_form[1] - write_form[1]))
    if apart is None:
        return True
    return apart % step == 0 and 0 < abs(apart // step) < lanes


def lanes_collide(loop: Any) -> bool:
    """Whether the lanes of ``loop`` (a vectorized ``For``, flattened buffers) meet in memory."""
    lane = loop.loop_var
    stores = collect(loop.body, tirx.BufferStore)
    stored = [s.buffer for s in stores]
    lane_vars = [lane, *_bound_inside(loop.body)]
    written = []  # (buffer, (index, its linear form)) of each store, each form computed once
    for store in stores:
        index = _index(store)
        form = _linear(index, lane)
        written.append((store.buffer, (index, form)))
        if form is not None and form[0] != 0:  # one element per lane
            continue
        if index is not None and _same_for_every_lane(index, lane_vars, stored) \
                and _same_for_every_lane(store.value, lane_vars, stored):
            continue
        return True
    lanes, analyzer = static_int(loop.extent), tvm.sym.Analyzer()
    for load in collect(loop.body, tvm.ir.TensorLoad):
        mine = [w for buffer, w in written if buffer.same_as(load.source)]
        if mine:
            index = _index(load)
            read = (index, _linear(index, lane))
            if any(_another_lanes(read, w, lanes, analyzer) for w in mine):
                return True
    return False


def LaneCollisionsSerial() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Vectorized loops whose lanes meet in memory (:func:`lanes_collide`) become serial loops,
    right before ``VectorizeLoop`` (see the module docstring)."""
    return serial_vectors_pass(lanes_collide, "tl.LaneCollisionsSerial")
