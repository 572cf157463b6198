"""Layout-free data movement: ``T.transpose`` (a copy) and the views ``T.reshape``/``T.view``.

``T.reshape`` and ``T.view`` do not move data: they declare another buffer on the same storage
(TVM's ``DeclBuffer`` with the source's data pointer), with another shape and, for ``T.view``,
another dtype or explicit strides. ``T.transpose`` copies a tile with its last two axes swapped.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import tvm
from tvm import tirx
from tvm.script.ir_builder import base as _ir_builder
from tvm.tirx.script.builder import ir as _B

from ._common import (
    OperandCheckError,
    all_of,
    check_options,
    as_tile,
    disjoint,
    analyzer,
    cast,
    fail,
    guarded,
    is_buffer,
    loop_nest,
    per_thread,
    same_extent,
    shape_text,
    static_int,
    storage_root,
    zero,
)
from ..operand_checks import check_dtype, check_extents


def _in_bounds(indices: list, shape: list) -> Optional[Any]:
    conds = []
    for idx, dim in zip(indices, shape):
        i, d = static_int(idx), static_int(dim)
        if i is not None and d is not None:
            if i >= d:
                conds.append(tirx.IntImm("bool", 0))
            continue
        try:
            if analyzer().can_prove(idx < dim):
                continue
        except Exception:  # noqa: BLE001 - unprovable: keep the guard
            pass
        conds.append(idx < dim)
    return all_of(conds)


def transpose(src: Any, dst: Any, annotations: Any = None) -> None:
    """``dst = src`` with the last two axes swapped (``dst[..., j, i] = src[..., i, j]``).

    Both sides are buffers or regions of the same rank (>= 2); ``dst``'s extents are ``src``'s
    with the last two exchanged (dimensions of size 1 included). Parts of the tile outside the
    destination buffer are not written; parts outside the source give 0 (as ``T.copy``).
    ``annotations`` (a dict, as in TileLang) is accepted and does not change the copy.

    :raises LoweringError: rank below 2, ranks or extents that do not fit, ``annotations`` not a dict.
    """
    op = "T.transpose"
    operands = (src, dst)
    check_options(op, operands, annotations=annotations)
    s = as_tile(op, operands, src, "source", allow_element=False)
    d = as_tile(op, operands, dst, "destination", allow_element=False)
    rank = len(s.extents)
    if rank < 2:
        fail(op, operands, f"rank mismatch: the source {shape_text(s.extents)} needs at least 2 dimensions")
    if len(d.extents) != rank:
        fail(op, operands, f"rank mismatch: the source is {rank}-D {shape_text(s.extents)}, the destination "
             f"{len(d.extents)}-D {shape_text(d.extents)}")
    want = list(s.extents[:-2]) + [s.extents[-1], s.extents[-2]]
    if not all(same_extent(a, b) for a, b in zip(want, d.extents)):
        fail(op, operands, f"shape mismatch: transposing {shape_text(s.extents)} gives {shape_text(want)}, but the "
             f"destination tile is {shape_text(d.extents)}")
    if (s.dtype == "bool") != (d.dtype == "bool"):
        fail(op, operands, f"dtype mismatch: cannot transpose {s.dtype} '{s.name}' into {d.dtype} '{d.name}'")
    if (s.buffer.same_as(d.buffer) and not disjoint(s, d)) or (
            not s.buffer.same_as(d.buffer) and storage_root(s.buffer).same_as(storage_root(d.buffer))):
        # a T.view / T.reshape of the source shares its storage: which elements meet cannot be told
        fail(op, operands, f"the destination overlaps the source tile '{s.name}' (or shares its storage, as a T.view "
             "or T.reshape of it): an in-place transpose would overwrite elements before they are read; transpose "
             "into another tile (T.transpose(S, S2)) and T.copy it back")

    def body(vs: list) -> None:
        didx = [v if static_int(st) == 0 else st + v for st, v in zip(d.starts, vs)]
        svs = list(vs[:-2]) + [vs[-1], vs[-2]]
        sidx = [v if static_int(st) == 0 else st + v for st, v in zip(s.starts, svs)]
        src_ok = _in_bounds(sidx, s.shape)
        value = cast(s.buffer[tuple(sidx)], d.dtype)
        if src_ok is not None:
            value = tirx.if_then_else(src_ok, value, zero(d.dtype))
        guarded(_in_bounds(didx, d.shape), lambda: _B.buffer_store(d.buffer, value, didx))

    loop_nest(list(d.extents), parallel=not per_thread(d), body=body)


def _shape_list(shape: Any) -> list:
    if isinstance(shape, (list, tuple)) or type(shape).__name__ in ("Array", "Shape"):
        return list(shape)
    return [shape]


def _bits(shape: Sequence[Any], dtype: str) -> Any:
    total: Any = tvm.runtime.DataType(dtype).bits * tvm.runtime.DataType(dtype).lanes
    for extent in shape:
        e = static_int(extent)
        if isinstance(total, int) and e is not None:
            total *= e
        else:
            total = (tirx.IntImm("int64", total) if isinstance(total, int) else total) * tirx.Cast("int64", extent)
    return total


def _same_bits(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        wrap = lambda x: tirx.IntImm("int64", x) if isinstance(x, int) else x  # noqa: E731
        return bool(analyzer().can_prove_equal(wrap(a), wrap(b)))
    except Exception:  # noqa: BLE001
        return False


def _declare(shape: list, dtype: str, src: Any, strides: Optional[list] = None) -> Any:
    """A buffer on ``src``'s storage: a ``DeclBuffer`` statement inside a kernel, else a plain buffer."""
    scope = str(src.ty.storage_scope) or "global"
    if _ir_builder.IRBuilder.is_in_scope():
        return _B.decl_buffer(tuple(shape), dtype, data=src.data, strides=strides, scope=scope)
    return tirx.decl_buffer(tuple(shape), dtype, data=src.data, strides=strides, scope=scope)


def _source(op: str, operands: Any, src: Any) -> Any:
    if not is_buffer(src):
        fail(op, operands, f"the source must be a whole buffer (a view starts at its first element), got {type(src).__name__} {src}")
    offset = static_int(src.ty.elem_offset) if src.ty.elem_offset is not None else 0
    if offset not in (0, None):
        fail(op, operands, f"the source '{src}' starts at element {offset}; views need a buffer that starts at its storage")
    return src


def reshape(src: Any, shape: Any) -> Any:
    """A view of ``src`` (same storage, same dtype) with another shape of the same element count.

    ``src`` is a compact buffer in any memory (a tensor parameter, ``T.alloc_shared``, ...). The
    result is indexed like any buffer; writes through it change ``src``.

    :raises LoweringError: (also an ``AssertionError``, as in TileLang) the element counts differ.
    """
    op = "T.reshape"
    shape = _shape_list(shape)
    operands = (src, shape_text(shape))
    src = _source(op, operands, src)
    check_extents(op, shape)
    dtype = str(src.ty.dtype)
    if not _same_bits(_bits(shape, dtype), _bits(list(src.ty.shape), dtype)):
        fail(op, operands, f"shape mismatch: {shape_text(shape)} does not hold the {shape_text(list(src.ty.shape))} "
             f"elements of '{src}'", OperandCheckError)
    return _declare(shape, dtype, src)


def view(src: Any, shape: Any = None, dtype: Any = None, strides: Any = None) -> Any:
    """A view of ``src`` with another shape and/or dtype (reinterpreting the bits), or explicit strides.

    The view covers the same bits: ``prod(shape) * bits(dtype) == prod(src.shape) * bits(src.dtype)``
    (``T.view(A_f32, (n, 2 * m), "float16")``). ``strides`` are in elements of ``dtype``; without
    them the view is compact (row-major) and ``src`` must be compact too.

    :raises LoweringError: (also an ``AssertionError`` for the size check, as in TileLang) sizes that
        differ, negative strides, a non-compact source without explicit strides.
    """
    op = "T.view"
    shape = list(src.ty.shape) if shape is None and is_buffer(src) else _shape_list(shape)
    operands = (src, shape_text(shape))
    src = _source(op, operands, src)
    check_extents(op, shape)
    dtype = str(src.ty.dtype) if dtype is None else check_dtype(op, dtype)
    if not _same_bits(_bits(shape, dtype), _bits(list(src.ty.shape), str(src.ty.dtype))):
        fail(op, operands, f"shape mismatch: {shape_text(shape)} x {dtype} does not cover the same bits as "
             f"'{src}' {shape_text(list(src.ty.shape))} x {src.ty.dtype}", OperandCheckError)
    if strides is None:
        src_strides = list(src.ty.strides)
        if src_strides:
            expected: Any = 1
            for extent, stride in zip(reversed(list(src.ty.shape)), reversed(src_strides)):
                if not (same_extent(extent, 1) or same_extent(stride, expected)):
                    fail(op, operands, f"'{src}' is not compact (strides {shape_text(src_strides)}); give strides=")
                expected = expected * extent
        return _declare(shape, dtype, src)
    strides = _shape_list(strides)
    if len(strides) != len(shape):
        fail(op, operands, f"rank mismatch: {len(strides)} strides for the {len(shape)}-D shape {shape_text(shape)}")
    for k, stride in enumerate(strides):
        value = static_int(stride)
        if value is not None and value < 0:
            fail(op, operands, f"stride {k} must be >= 0, got {value}")
    return _declare(shape, dtype, src, strides=strides)
