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

from ..language.tileops._common import collect
from .vector_lanes import serial_vectors_pass

__all__ = ["LaneCollisionsSerial", "lanes_collide"]


def _constant(expr: Any) -> Optional[int]:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _index(node: Any) -> Any:
    """The flat index of a store or load (its only index after ``FlattenBuffer``), else None."""
    indices = list(node.indices)
    return indices[0] if len(indices) == 1 else None


def _one_element_per_lane(index: Any, lane: Any) -> bool:
    if index is None:
        return False
    linear = tvm.sym.detect_linear_equation(index, [lane])
    return len(linear) == 2 and _constant(linear[0]) not in (None, 0)


def _bound_inside(body: Any) -> list:
    """The variables the loop body binds: inner loop variables, ``let`` variables, buffers declared in it."""
    names: list = []
    for node in collect(body, (tirx.For, tirx.LetStmt, tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer)):
        names.append(node.loop_var if isinstance(node, tirx.For) else
                     node.buffer if isinstance(node, (tirx.AllocBuffer, tirx.DeclBuffer)) else node.var)
    return names


def _same_for_every_lane(expr: Any, lane_vars: list, stored: list) -> bool:
    """Whether ``expr`` uses no variable of the loop and reads no buffer the loop stores to."""
    if any(any(load.source.same_as(s) for s in stored) for load in collect(expr, tvm.ir.TensorLoad)):
        return False
    used = collect(expr, tvm.ir.Var)
    return not any(var.same_as(v) for var in used for v in lane_vars)


def _another_lanes(load_index: Any, store_index: Any, lane: Any, lanes: Optional[int]) -> bool:
    """Whether a load at ``load_index`` may read an element a store at ``store_index`` writes for
    another lane (conservatively True where the indices are not both ``c * lane + constant``)."""
    if load_index is None or store_index is None:
        return True
    if tvm_ffi.structural_equal(load_index, store_index):
        return False
    read = tvm.sym.detect_linear_equation(load_index, [lane])
    write = tvm.sym.detect_linear_equation(store_index, [lane])
    if len(read) != 2 or len(write) != 2 or lanes is None:
        return True
    step, other = _constant(read[0]), _constant(write[0])
    if step is None or step == 0 or step != other:
        return True
    apart = _constant(tvm.sym.Analyzer().simplify(read[1] - write[1]))
    if apart is None:
        return True
    return apart % step == 0 and 0 < abs(apart // step) < lanes


def lanes_collide(loop: Any) -> bool:
    """Whether the lanes of ``loop`` (a vectorized ``For``, flattened buffers) meet in memory."""
    lane = loop.loop_var
    stores = collect(loop.body, tirx.BufferStore)
    stored = [s.buffer for s in stores]
    lane_vars = [lane, *_bound_inside(loop.body)]
    for store in stores:
        index = _index(store)
        if _one_element_per_lane(index, lane):
            continue
        if index is not None and _same_for_every_lane(index, lane_vars, stored) \
                and _same_for_every_lane(store.value, lane_vars, stored):
            continue
        return True
    lanes = _constant(loop.extent)
    for load in collect(loop.body, tvm.ir.TensorLoad):
        if any(_another_lanes(_index(load), _index(s), lane, lanes) for s in stores if s.buffer.same_as(load.source)):
            return True
    return False


def LaneCollisionsSerial() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Vectorized loops whose lanes meet in memory (:func:`lanes_collide`) become serial loops,
    right before ``VectorizeLoop`` (see the module docstring)."""
    return serial_vectors_pass(lanes_collide, "tl.LaneCollisionsSerial")
