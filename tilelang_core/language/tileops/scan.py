"""Inclusive scans along one dimension of a tile: ``T.cumsum`` and ``T.cummax``."""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional

from tvm import tirx
from tvm.tirx.script.builder import ir as _B

from ._common import (
    HALF_FLOATS,
    HALF_SUM_DTYPE,
    as_tile,
    cast,
    check_options,
    fail,
    is_float,
    loop_nest,
    per_thread,
    same_extent,
    shape_text,
    static_int,
)


def _running_max(acc: Any, x: Any) -> Any:
    """``max(acc, x)`` of the running maximum; for floats NaN elements are ignored, as by
    ``T.reduce_max`` and CUDA's ``fmaxf`` (NaN only while every element so far is NaN). With the
    CPU targets' ``T.max`` (``a > b ? a : b``) a NaN reset the running maximum: the ``cummax`` of
    ``[inf, nan, 0]`` was ``[inf, nan, 0]`` on ``c`` and ``llvm``, ``[inf, inf, inf]`` on CUDA."""
    dtype = str(acc.ty.dtype)
    if not is_float(dtype):
        return tirx.max(acc, x)
    wide = acc if dtype in ("float32", "float64") else tirx.Cast("float32", acc)
    return tirx.Select(tirx.Or(x > acc, tirx.isnan(wide)), x, acc)


def _scan(kind: str, src: Any, dst: Optional[Any], dim: Any, reverse: bool) -> None:
    op = f"T.{kind}"
    operands = (src,) if dst is None else (src, dst)
    s = as_tile(op, operands, src, "source", allow_element=False)
    d = s if dst is None else as_tile(op, operands, dst, "destination", allow_element=False)
    if isinstance(dim, bool) or not isinstance(dim, Integral):
        fail(op, operands, f"dim must be an int, got {dim!r}")
    rank = len(s.extents)
    if not -rank <= dim < rank:
        fail(op, operands, f"dim {dim} is out of range for the {rank}-D source {shape_text(s.extents)}")
    dim = int(dim) % rank
    if len(d.extents) != rank or not all(same_extent(a, b) for a, b in zip(s.extents, d.extents)):
        kind_err = "rank mismatch" if len(d.extents) != rank else "shape mismatch"
        fail(
            op,
            operands,
            f"{kind_err}: the destination '{d.name}' {shape_text(d.extents)} must have the source's shape "
            f"{shape_text(s.extents)}",
        )
    if "bool" in (s.dtype, d.dtype):
        running = "a running count" if kind == "cumsum" else "a running any (0/1)"
        fail(
            op,
            operands,
            f"bool tiles: source '{s.name}' is {s.dtype} and destination '{d.name}' is {d.dtype}; {op} does not "
            f"scan bool tiles. For {running}, cast the elements into an integer tile first (in a T.Parallel "
            f"loop: c[i, j] = T.cast(a[i, j], \"int32\")) and {op} that tile",
        )
    if is_float(s.dtype) != is_float(d.dtype):
        fail(op, operands, f"dtype mismatch: source '{s.name}' is {s.dtype} and destination '{d.name}' is {d.dtype}")
    n = s.extents[dim]
    outer = [e for k, e in enumerate(s.extents) if k != dim]
    acc_dtype = d.dtype
    # a float16/bfloat16 running sum is kept in float32 and each output rounded from it, as torch
    # does: rounded after every addition, the sum stalled (1 + 0.001 + ... stayed 1.0 in float16)
    # and an intermediate inf stuck for the rest of the row
    wide = kind == "cumsum" and acc_dtype in HALF_FLOATS

    def at(t: Any, vs: list, k: Any) -> list:
        point = vs[:dim] + [k] + vs[dim:]
        return [p if static_int(st) == 0 else st + p for st, p in zip(t.starts, point)]

    first = n - 1 if reverse else 0

    def start(vs: list) -> None:
        x0 = cast(s.buffer[tuple(at(s, vs, first))], acc_dtype)
        _B.buffer_store(d.buffer, x0, at(d, vs, first))

    def step(vs: list, r: Any) -> None:
        k = (n - 1 - r) if reverse else r
        prev = (k + 1) if reverse else (k - 1)
        x = cast(s.buffer[tuple(at(s, vs, k))], acc_dtype)
        acc = d.buffer[tuple(at(d, vs, prev))]
        _B.buffer_store(d.buffer, acc + x if kind == "cumsum" else _running_max(acc, x), at(d, vs, k))

    def wide_start(sums: Any, vs: list, lane: list) -> None:
        """The first output and the float32 running sum of a row (``lane``: its index in ``sums``)."""
        _B.buffer_store(sums, tirx.Cast(HALF_SUM_DTYPE, s.buffer[tuple(at(s, vs, first))]), lane)
        _B.buffer_store(d.buffer, tirx.Cast(acc_dtype, sums[tuple(lane)]), at(d, vs, first))

    def wide_step(sums: Any, vs: list, lane: list, r: Any) -> None:
        k = (n - 1 - r) if reverse else r
        _B.buffer_store(sums, sums[tuple(lane)] + tirx.Cast(HALF_SUM_DTYPE, s.buffer[tuple(at(s, vs, k))]), lane)
        _B.buffer_store(d.buffer, tirx.Cast(acc_dtype, sums[tuple(lane)]), at(d, vs, k))  # the new sum, read back

    in_place = d.buffer.same_as(s.buffer) and all(
        static_int(a) is not None and static_int(a) == static_int(b) for a, b in zip(s.starts, d.starts)
    )

    if per_thread(s, d):
        def body(vs: list) -> None:
            if wide:
                sums = _B.alloc_buffer((1,), HALF_SUM_DTYPE, scope="local")
                wide_start(sums, vs, [0])
                with _B.serial(1, n) as r:
                    wide_step(sums, vs, [0], r)
                return
            if not in_place:
                start(vs)
            with _B.serial(1, n) as r:
                step(vs, r)

        loop_nest(outer, parallel=False, body=body)
        return
    # Shared or fragment tiles: the scan position is the outer, serial loop and each step is a
    # T.Parallel nest over the other dimensions (a 1-D scan: T.Parallel(1)). On GPU targets one
    # thread per row does each step, and the barriers between steps stay outside any condition.
    lanes = outer or [1]

    def over(fn):
        loop_nest(lanes, parallel=True, body=(lambda vs: fn([])) if not outer else fn)

    if wide:  # one float32 running sum per row, in the destination's memory (the same threads own it)
        sums = _B.alloc_buffer(lanes, HALF_SUM_DTYPE, scope=d.buffer.scope())
        lane = (lambda vs: list(vs) or [0])
        over(lambda vs: wide_start(sums, vs, lane(vs)))
        with _B.serial(1, n) as r:
            over(lambda vs: wide_step(sums, vs, lane(vs), r))
        return
    if not in_place:  # in place, the first element is already there
        over(start)
    with _B.serial(1, n) as r:
        over(lambda vs: step(vs, r))


def cumsum(src: Any, dst: Optional[Any] = None, dim: int = 0, reverse: bool = False, annotations: Any = None) -> None:
    """Inclusive prefix sum of ``src`` along ``dim`` into ``dst`` (in place when ``dst`` is None).

    ``reverse=True`` sums from the end (``dst[k] = src[k] + ... + src[n-1]``). Tiles (buffer or
    region) in any memory; ``dst`` has ``src``'s shape. Accumulates in ``dst``'s dtype, except a
    float16/bfloat16 ``dst``: its running sum is float32 and each output is rounded from it, as torch.

    :raises LoweringError: ``dim`` out of range, shape or dtype mismatch.
    """
    check_options("T.cumsum", (src,) if dst is None else (src, dst), reverse=reverse)
    _scan("cumsum", src, dst, dim, bool(reverse))


def cummax(src: Any, dst: Optional[Any] = None, dim: int = 0, reverse: bool = False, annotations: Any = None) -> None:
    """Inclusive running maximum of ``src`` along ``dim`` (see :func:`cumsum`)."""
    check_options("T.cummax", (src,) if dst is None else (src, dst), reverse=reverse)
    _scan("cummax", src, dst, dim, bool(reverse))
