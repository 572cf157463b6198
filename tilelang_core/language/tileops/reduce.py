"""Reductions over one dimension of a tile: ``T.reduce_sum/max/min/abssum/absmax`` and the
bitwise ``T.reduce_bitand/bitor/bitxor``."""

from __future__ import annotations

from numbers import Integral
from typing import Any, Callable

from tvm import DataType, tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as _B

from ..dtype_limits import extreme
from .intrinsics import wrapping_abs
from ._common import (
    OperandTypeError,
    HALF_FLOATS,
    HALF_SUM_DTYPE,
    ON_CHIP_SCOPES,
    as_tile,
    cast,
    check_batch,
    check_options,
    fail,
    is_float,
    is_unit,
    loop_nest,
    per_thread,
    same_extent,
    shape_text,
    static_int,
    storage_root,
)


_BITWISE = ("bitand", "bitor", "bitxor")


def identity(kind: str, dtype: str) -> Any:
    """The value a ``kind`` reduction (or ``T.alloc_reducer`` of that op) of ``dtype`` starts from."""
    if dtype == "bool":  # max and bitor are logical or, min and bitand logical and (as torch's of bool tensors)
        return tirx.const(kind in ("min", "bitand"), "bool")
    if kind == "absmax" and not is_float(dtype):
        # |MIN| of a signed integer is MIN (it wraps, as in torch): 0 would beat a row of only MIN
        return tirx.min_value(dtype)
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return cast(0, dtype)
    if kind == "bitand":
        return tirx.max_value(dtype) if dtype.startswith("uint") else tirx.IntImm(dtype, -1)
    # -inf for max and +inf for min, or the finite limit of a float without an infinity (float8_e4m3fn;
    # float8_e8m0fnu's are 2^127 and 2^-127: TVM's own limits are not), as T.infinity/T.max_value
    return extreme(dtype, positive=kind == "min")


def _abs(x: Any) -> Any:
    """``|x|`` as a select (TVM's ``fabs`` has no C lowering); a signed integer's minimum is its own
    ``|x|``, as in torch and ``T.abs`` (``-x`` of it was undefined in C, and wrong on ``llvm``)."""
    dtype = str(x.ty.dtype)
    if dtype.startswith("int"):
        return wrapping_abs(x)
    return tirx.Select(x < cast(0, dtype), -x, x)


def isnan(x: Any) -> Any:
    """``isnan(x)`` for every float dtype (TVM's ``isnan`` takes float16/32/64 only: bfloat16,
    float8 and narrower floats are compared in float32, which keeps a NaN a NaN)."""
    dtype = DataType(str(x.ty.dtype))
    if str(dtype.with_lanes(1)) in ("float16", "float32", "float64"):
        return tirx.isnan(x)
    return tirx.isnan(tirx.Cast(str(DataType("float32").with_lanes(dtype.lanes)), x))


def combine_rule(kind: str, dtype: str, nan_propagate: bool) -> Callable[[Any, Any], Any]:
    """``(acc, x) -> the accumulator after taking x`` of a ``kind`` reduction in ``dtype``."""
    if kind in ("sum", "abssum"):
        return lambda acc, x: acc + x
    if dtype == "bool":
        return tirx.Or if kind == "max" else tirx.And
    if kind in _BITWISE:
        return {"bitand": tirx.bitwise_and, "bitor": tirx.bitwise_or, "bitxor": tirx.bitwise_xor}[kind]
    bigger = kind in ("max", "absmax")
    if not is_float(dtype):
        return tirx.max if bigger else tirx.min

    def better(acc: Any, x: Any) -> Any:
        return x > acc if bigger else x < acc

    if nan_propagate:
        # a NaN element replaces the accumulator, and nothing replaces a NaN accumulator
        return lambda acc, x: tirx.Select(tirx.Or(isnan(x), better(acc, x)), x, acc)
    # NaN elements are skipped (C's fmax/fmin); a NaN accumulator (a NaN first element) is replaced
    return lambda acc, x: tirx.Select(tirx.Or(better(acc, x), isnan(acc)), x, acc)


def _reduce(kind: str, src: Any, dst: Any, dim: Any, clear: Any, nan_propagate: Any = False, batch: Any = 1,
            annotations: Any = None) -> None:
    op = f"T.reduce_{kind}"
    operands = (src, dst)
    check_options(op, operands, clear=clear, nan_propagate=nan_propagate, annotations=annotations)
    s = as_tile(op, operands, src, "source", allow_element=False)
    d = as_tile(op, operands, dst, "destination", allow_element=False)
    check_batch(op, operands, batch, d.extents, d.name)
    for role, t in (("source", s), ("destination", d)):
        if t.scope not in ON_CHIP_SCOPES:
            fail(
                op,
                operands,
                f"wrong scope: {role} '{t.name}' is in {t.scope} memory; reductions work on tiles in "
                "fragment, local or shared memory (T.copy the data there first)",
            )
    if isinstance(dim, bool) or not isinstance(dim, Integral):
        fail(op, operands, f"dim must be an int, got {dim!r}")
    rank = len(s.extents)
    if not -rank <= dim < rank:
        fail(op, operands, f"dim {dim} is out of range for the {rank}-D source {shape_text(s.extents)}")
    dim = int(dim) % rank
    out = [e for k, e in enumerate(s.extents) if k != dim]
    kept = [e if k != dim else 1 for k, e in enumerate(s.extents)]
    dext = list(d.extents)
    if len(dext) == len(out) and all(same_extent(a, b) for a, b in zip(dext, out)):
        keepdim = False
    elif len(dext) == len(kept) and all(same_extent(a, b) for a, b in zip(dext, kept)):
        keepdim = True
    elif not out and len(dext) == 1 and is_unit(dext[0]):
        keepdim = True
    else:
        kind_err = "rank mismatch" if len(dext) not in (len(out), len(kept)) else "shape mismatch"
        fail(
            op,
            operands,
            f"{kind_err}: reducing {shape_text(s.extents)} over dim {dim} gives {shape_text(out or [1])}, but the "
            f"destination '{d.name}' is {shape_text(dext)}",
        )
    if "bool" in (s.dtype, d.dtype) and (s.dtype != d.dtype or kind not in ("max", "min")):
        fail(
            op,
            operands,
            f"bool tiles: source '{s.name}' is {s.dtype} and destination '{d.name}' is {d.dtype}; only "
            "T.reduce_max (any) and T.reduce_min (all) reduce a bool tile, into a bool tile. For a "
            "count or a sum, cast the elements into an integer tile first (in a T.Parallel loop: "
            "c[i, j] = T.cast(a[i, j], \"int32\"))",
        )
    if is_float(s.dtype) != is_float(d.dtype):
        fail(
            op,
            operands,
            f"dtype mismatch: source '{s.name}' is {s.dtype} and destination '{d.name}' is {d.dtype}; "
            "use a destination of the same kind (float or integer)",
        )
    if kind in _BITWISE and (is_float(s.dtype) or is_float(d.dtype)):
        fail(
            op,
            operands,
            f"dtype mismatch: {op} needs integer tiles, got source '{s.name}' {s.dtype} and destination "
            f"'{d.name}' {d.dtype}",
        )
    if nan_propagate and not is_float(d.dtype):
        fail(op, operands, f"nan_propagate=True needs float tiles, got the {d.dtype} destination '{d.name}'")
    acc = d.dtype
    combine = combine_rule(kind, acc, bool(nan_propagate))
    absolute = kind.startswith("abs")
    red_extent = s.extents[dim]
    packing = packable(kind, s, d, bool(nan_propagate))
    # the order is free (lowering/lane_reductions.py) unless the source is on the destination's
    # storage (a T.view of it), where the order decides which elements it reads already reduced
    on_destination = storage_root(s.buffer).same_as(storage_root(d.buffer))
    if on_destination:
        _reduce_apart(kind, s, d, src, dim, clear, nan_propagate, batch, annotations)
        return
    free = kind in _LANE_KINDS and is_float(acc)
    lanes = {LANE_REDUCE: kind + (".nan" if nan_propagate else "")} if free else None

    def body(vs: list) -> None:
        if not out:
            didx = list(d.starts)
        elif keepdim:
            didx = _indices(d, vs[:dim] + [0] + vs[dim:])
        else:
            didx = _indices(d, vs)
        if kind in _WIDE_SUMS and acc in HALF_FLOATS:
            _wide_sum(s, d, didx, lambda r: _indices(s, vs[:dim] + [r] + vs[dim:]), red_extent, clear, absolute)
            return
        if not per_thread(d):
            # A destination the block shares (shared memory, or a fragment): accumulate in a
            # register and store once. A reduction into one element is run by every thread (of a
            # GPU block), each storing the same value; accumulating in the shared element made
            # every thread read-modify-write it at once.
            slot = IRBuilder.name("block_acc", _B.alloc_buffer((1,), acc, scope="local"))
            _B.buffer_store(slot, identity(kind, acc) if clear else d.buffer[tuple(didx)], [0])
            with _B.serial(0, red_extent, annotations=lanes) as r:
                x = cast(s.buffer[tuple(_indices(s, vs[:dim] + [r] + vs[dim:]))], acc)
                _B.buffer_store(slot, combine(slot[0], _abs(x) if absolute else x), [0])
            _B.buffer_store(d.buffer, slot[0], didx)
            return
        if clear:
            # every reduction starts from its identity (-inf for max, +inf for min, 0 for a float absmax),
            # as TileLang: a row of only NaN (NaN ignored) gives the identity
            _B.buffer_store(d.buffer, identity(kind, acc), didx)
        with _B.serial(0, red_extent, annotations={**(packing or {}), **(lanes or {})} or None) as r:
            sidx = _indices(s, vs[:dim] + [r] + vs[dim:])
            x = cast(s.buffer[tuple(sidx)], acc)
            if absolute:
                x = _abs(x)
            _B.buffer_store(d.buffer, combine(d.buffer[tuple(didx)], x), didx)

    if out and not per_thread(d) and all(static_int(e) == 1 for e in out):
        # one destination element the block shares (a (1, N) row into (1,)): every thread computes
        # it, as for a whole tile into one element. A T.Parallel(1) nest ran it in one thread, under
        # `if threadIdx.x < 1`, and with the element in shared memory (a shared tile, a fragment
        # read outside T.Parallel) TVM's ThreadSync stopped at its read and write there ("Cannot
        # insert syncs inside condition").
        body([0] * len(out))
        return
    loop_nest(out, parallel=not per_thread(d), body=body)


def _reduce_apart(kind: str, s: Any, d: Any, src: Any, dim: int, clear: Any, nan_propagate: Any, batch: Any,
                  annotations: Any) -> None:
    """A reduction whose source is on the destination's storage (a ``T.view``/``T.reshape`` of it,
    or a region of the same tile), into a tile of its own, copied into the destination after: the
    destination's elements change only once every source element has been read.

    Written in place, a stored result was read again as a source element:
    ``T.reduce_sum(L, L[0, 0:8], dim=0)`` of a ``T.alloc_local`` gave row 1 (the first element set
    to the identity, then read), and ``T.reduce_sum(L, T.reshape(L, (16,))[8:10], dim=1)`` summed
    row 1 with row 0's result in it, in every scope."""
    from .copy import copy

    region = d.buffer[tuple(slice(start, start + extent) for start, extent in zip(d.starts, d.extents))]
    apart = IRBuilder.name(f"{d.name}_apart", _B.alloc_buffer(tuple(d.extents), d.dtype, scope=d.buffer.scope()))
    if not clear:
        copy(region, apart)
    _reduce(kind, src, apart, dim, clear, nan_propagate, batch, annotations)
    copy(apart, region)


#: Reductions whose float16/bfloat16 (HALF_FLOATS) sums accumulate in float32 and round once (_wide_sum).
_WIDE_SUMS = ("sum", "abssum")


def _wide_sum(s: Any, d: Any, didx: list, source_index: Callable[[Any], list], extent: Any, clear: bool,
              absolute: bool) -> None:
    """A sum into a float16/bfloat16 element, accumulated in float32 and rounded once at the end
    (as torch sums 16-bit tensors): adding 128 values into a bfloat16 accumulator, rounded after
    every addition, is off by several units of its last place."""
    wide = HALF_SUM_DTYPE
    slot = _B.alloc_buffer((1,), wide, scope="local")
    _B.buffer_store(slot, cast(0, wide) if clear else tirx.Cast(wide, d.buffer[tuple(didx)]), [0])
    with _B.serial(0, extent, annotations={LANE_REDUCE: "sum"}) as r:
        x = tirx.Cast(wide, s.buffer[tuple(source_index(r))])
        _B.buffer_store(slot, slot[0] + (_abs(x) if absolute else x), [0])
    _B.buffer_store(d.buffer, tirx.Cast(d.dtype, slot[0]), didx)


#: Loop annotation on the reduction loop of a float ``reduce_sum/abssum/max/min/absmax``: its value
#: names the reduction (``".nan"`` appended for ``nan_propagate=True``), and the order in which the
#: loop takes the elements is free. CPU targets split it into partial reductions or, over another
#: dimension than the last, run it outside the destination's ``T.Parallel`` nest
#: (lowering/lane_reductions.py); GPU targets drop it. A source on the destination's storage (a
#: ``T.view`` of it) gets no mark.
LANE_REDUCE = "tl.lane_reduce"
_LANE_KINDS = ("sum", "abssum", "max", "min", "absmax")

#: Loop annotation on the reduction loop of a per-thread float16/bfloat16 max/min/absmax: its
#: value names the reduction (``"max"``, ``"min"``, ``"absmax"``; ``".nan"`` appended for
#: ``nan_propagate=True``). The CUDA lowering may pack two lanes per instruction
#: (lowering/packed_reductions.py); every other target ignores it.
PACKED_REDUCE = "tl.packed_reduce"


def packable(kind: str, s: Any, d: Any, nan_propagate: bool) -> Any:
    """The loop annotations of a reduction the CUDA lowering may pack (:data:`PACKED_REDUCE`), else None:
    max/min/absmax of a per-thread float16/bfloat16 destination from a per-thread source of its dtype."""
    if kind not in ("max", "min", "absmax") or d.dtype not in HALF_FLOATS or s.dtype != d.dtype:
        return None
    if not per_thread(d) or s.scope not in ("local", "local.fragment"):
        return None
    return {PACKED_REDUCE: kind + (".nan" if nan_propagate else "")}


def _indices(t: Any, point: list) -> list:
    return [p if static_int(st) == 0 else st + p for st, p in zip(t.starts, point)]


def reduce_sum(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1, annotations: Any = None) -> None:
    """``out = sum(buffer, dim)`` (``out += ...`` with ``clear=False``), accumulating in out's dtype.

    ``out`` has ``buffer``'s shape without ``dim`` (or with ``dim`` of size 1). Operands are tiles
    in fragment, local or shared memory. ``batch`` (TileLang's batched all-reduce width) and
    ``annotations`` are accepted and do not change the result. Parameter names and positional
    order are TileLang's, for every ``T.reduce_*``.

    :raises LoweringError: wrong scope, ``dim`` out of range, shape, rank or dtype mismatch, an
        option of the wrong kind (``clear``/``nan_propagate`` not a bool, ``batch`` not an int).
    """
    _reduce("sum", buffer, out, dim, clear, batch=batch, annotations=annotations)


def reduce_max(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: Any = None) -> None:
    """``out = max(buffer, dim)`` (``out = max(out, ...)`` with ``clear=False``); see :func:`reduce_sum`.

    Floats: NaN elements are ignored (as CUDA's ``fmaxf``; a row of only NaN gives ``-inf``, the
    identity), unless ``nan_propagate=True``: then any NaN makes the result NaN.
    """
    _reduce("max", buffer, out, dim, clear, nan_propagate, batch, annotations)


def reduce_min(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: Any = None) -> None:
    """``out = min(buffer, dim)`` (``out = min(out, ...)`` with ``clear=False``); NaN as :func:`reduce_max`."""
    _reduce("min", buffer, out, dim, clear, nan_propagate, batch, annotations)


def reduce_abssum(buffer: Any, out: Any, dim: int = -1, batch: int = 1, annotations: Any = None, *,
                  clear: bool = True) -> None:
    """``out = sum(|buffer|, dim)`` (``out += ...`` with ``clear=False``); see :func:`reduce_sum`.

    TileLang's ``reduce_abssum`` has no ``clear``: its fourth positional argument is ``batch``, so
    ``clear`` is keyword-only here.
    """
    _reduce("abssum", buffer, out, dim, clear, batch=batch, annotations=annotations)


def reduce_absmax(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                  nan_propagate: bool = False, annotations: Any = None) -> None:
    """``out = max(|buffer|, dim)`` (``out = max(out, ...)`` with ``clear=False``); NaN as :func:`reduce_max`."""
    _reduce("absmax", buffer, out, dim, clear, nan_propagate, batch, annotations)


def reduce_bitand(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1, annotations: Any = None) -> None:
    """``out = buffer[0] & buffer[1] & ...`` over ``dim`` (``out &= ...`` with ``clear=False``), integer tiles."""
    _reduce("bitand", buffer, out, dim, clear, batch=batch, annotations=annotations)


def reduce_bitor(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1, annotations: Any = None) -> None:
    """``out = buffer[0] | buffer[1] | ...`` over ``dim`` (``out |= ...`` with ``clear=False``), integer tiles."""
    _reduce("bitor", buffer, out, dim, clear, batch=batch, annotations=annotations)


def reduce_bitxor(buffer: Any, out: Any, dim: int = -1, clear: bool = True, batch: int = 1, annotations: Any = None) -> None:
    """``out = buffer[0] ^ buffer[1] ^ ...`` over ``dim`` (``out ^= ...`` with ``clear=False``), integer tiles."""
    _reduce("bitxor", buffer, out, dim, clear, batch=batch, annotations=annotations)


#: The kinds ``T.reduce`` takes, as TileLang's ``reduce_type``.
REDUCE_KINDS = ("sum", "abssum", "max", "absmax", "min", "bitand", "bitor", "bitxor")


def reduce(buffer: Any, out: Any, reduce_type: str, dim: int, clear: bool, batch: int = 1,
           annotations: Any = None) -> None:
    """``T.reduce_<reduce_type>(buffer, out, dim, clear)``: TileLang's generic form
    (``reduce_type`` one of :data:`REDUCE_KINDS`). An ``annotations`` entry ``nan_propagate``
    is the ``nan_propagate=`` of max, min and absmax, as in TileLang.

    :raises OperandTypeError: an unknown ``reduce_type``, and every error of the reduction itself.
    """
    if not isinstance(reduce_type, str) or reduce_type not in REDUCE_KINDS:
        fail("T.reduce", (buffer, out), f"reduce_type must be one of {', '.join(map(repr, REDUCE_KINDS))}, got "
             f"{reduce_type!r}", OperandTypeError)
    options = dict(annotations or {}) if isinstance(annotations, dict) else annotations
    nan_propagate = options.pop("nan_propagate", False) if isinstance(options, dict) else False
    if nan_propagate and reduce_type not in ("max", "min", "absmax"):
        fail("T.reduce", (buffer, out), f"nan_propagate applies to max, min and absmax, not {reduce_type!r}",
             OperandTypeError)
    _reduce(reduce_type, buffer, out, dim, clear, nan_propagate, batch, options or None)
