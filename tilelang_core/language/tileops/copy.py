"""``T.copy``, ``T.async_copy`` (with ``T.ptx_commit_group`` / ``T.ptx_wait_group``), ``T.fill`` and ``T.clear``."""

from __future__ import annotations

from typing import Any

from tvm.tirx.script.builder import ir as _B
from tvm import tirx

from .safe_value import safe_value
from ._common import (
    OperandTypeError,
    Tile,
    all_of,
    as_tile,
    cast,
    check_options,
    describe,
    number_constant,
    fail,
    guarded,
    index_in_dim_width,
    is_buffer,
    is_float,
    is_unit,
    loop_nest,
    per_thread,
    shape_text,
    same_extent,
    static_int,
    zero,
)


def _element_inside(buffer: Any, indices: Any) -> Any:
    """``0 <= i < dim`` for every index of an element access that is not provably inside, or None."""
    conds = []
    for index, dim in zip(indices, buffer.shape):
        i, d = static_int(index), static_int(dim)
        if i is not None and d is not None and 0 <= i < d:
            continue
        index = index_in_dim_width(index, dim)  # int64 where the extent is: no int32 wrap
        conds.append(tirx.And(index >= tirx.const(0, index.ty.dtype), index < dim))
    return all_of(conds)


def _resolve_copy(src: Any, dst: Any) -> tuple[Tile, Tile, list]:
    operands = (src, dst)
    s = as_tile("T.copy", operands, src, "source")
    d = as_tile("T.copy", operands, dst, "destination")
    try:
        # A corner takes the other side's extents (trailing dimensions; leading ones get 1);
        # when the other side has more dimensions, its size-1 dimensions are dropped first.
        if s.kind == "element":
            s = s.with_extents(d.extents if len(d.extents) <= len(s.shape) else d.squeezed)
        elif d.kind == "element":
            d = d.with_extents(s.extents if len(s.extents) <= len(d.shape) else s.squeezed)
    except ValueError:
        small, big = (s, d) if s.kind == "element" else (d, s)
        fail(
            "T.copy",
            operands,
            f"rank mismatch: the tile {shape_text(big.squeezed)} has more dimensions than "
            f"'{small.name}' {shape_text(small.shape)}",
        )
    s, d, guards = _units_facing_run_time_extents(s, d)
    # extents may differ only where one of them is known at run time alone (a dynamic tail)
    if len(s.squeezed) != len(d.squeezed) or not all(
        same_extent(a, b) or static_int(a) is None or static_int(b) is None for a, b in zip(s.squeezed, d.squeezed)
    ):
        kind = "rank mismatch" if len(s.squeezed) != len(d.squeezed) else "shape mismatch"
        fail(
            "T.copy",
            operands,
            f"{kind}: the source tile has extents {shape_text(s.extents)} and the destination tile "
            f"{shape_text(d.extents)}; both must have the same extents (ignoring dimensions of size 1; "
            "a dynamic extent may differ from the other side's, and then only the common part is copied)"
            + _negative_start_hint(s, d),
        )
    if s.dtype == "bool" and d.dtype != "bool" or d.dtype == "bool" and s.dtype != "bool":
        fail("T.copy", operands, f"dtype mismatch: cannot copy {s.dtype} '{s.name}' into {d.dtype} '{d.name}'")
    return s, d, guards


def _negative_start_hint(*tiles: Tile) -> str:
    """A sentence for a tile region with a constant negative start (``A[-3:]``), which TVMScript
    does not count from the end: it is the elements from -3 up to the slice's stop; "" for none."""
    for tile in tiles:
        if tile.kind != "region":
            continue
        for dim, (start, extent) in enumerate(zip(tile.starts, tile.extents)):
            first, count = static_int(start), static_int(extent)
            if first is not None and first < 0 and count is not None:
                return (f". The region {describe(tile.source)} starts at {first} in dimension {dim}: a negative slice "
                        f"start does not count from the end here (it spans {first} to {first + count}); write the "
                        f"start from the end yourself, e.g. {tile.name}[N - 3:] for the last 3 of N")
    return ""


def _units_facing_run_time_extents(s: Tile, d: Tile) -> tuple[Tile, Tile, list]:
    """``(s, d, guards)`` with each run-time extent that faces a dimension of size 1 on the other
    side (extents aligned from the last dimension) made 1, guarded by ``extent > 0``.

    The common part of a run-time extent and 1 is that one element when the extent is positive,
    nothing otherwise. Without this, ``T.copy(A[r, c:T.min(n, c + bn)], S)`` with a ``(bn,)`` tile
    worked for every ``bn`` but 1, whose size-1 dimension is ignored while the run-time one is
    not ("rank mismatch"). Tiles whose extents already match are returned as they are.
    """
    if len(s.squeezed) == len(d.squeezed):
        return s, d, []
    rank = max(len(s.extents), len(d.extents))
    ext = {"s": list(s.extents), "d": list(d.extents)}
    pad = {side: rank - len(e) for side, e in ext.items()}
    guards = []
    for k in range(rank):
        here = {side: ext[side][k - pad[side]] if k >= pad[side] else 1 for side in ext}
        for side, other in (("s", "d"), ("d", "s")):
            if k >= pad[side] and static_int(here[side]) is None and is_unit(here[other]):
                guards.append(here[side] > 0)
                ext[side][k - pad[side]] = 1
    if not guards:
        return s, d, []
    return (Tile(s.buffer, list(s.starts), ext["s"], "region", s.source),
            Tile(d.buffer, list(d.starts), ext["d"], "region", d.source), guards)


def _common_extents(src: list, dst: list) -> tuple[list, list]:
    """Loop extents of a copy between tiles of these (squeezed) extents, and the guards it needs.

    Equal extents are the loop's. Where one side's extent is dynamic and differs from the other's,
    the common part ``min(a, b)`` is copied: the loop runs over the static extent (or the minimum
    of two dynamic ones) and ``(dim, limit)`` guards keep it inside the dynamic one.
    """
    extents, limits = [], []
    for k, (a, b) in enumerate(zip(src, dst)):
        if same_extent(a, b):
            extents.append(a)
        elif static_int(a) is not None or static_int(b) is not None:
            static, dynamic = (a, b) if static_int(a) is not None else (b, a)
            extents.append(static)
            limits.append((k, dynamic))
        else:
            extents.append(tirx.min(a, b))
    return extents, limits


def copy(
    src: Any,
    dst: Any,
    *,
    coalesced_width: Any = None,
    disable_tma: bool = False,
    eviction_policy: Any = None,
    prefer_instruction: Any = None,
    annotations: Any = None,
    loop_layout: Any = None,
) -> None:
    """Copy a tile: ``T.copy(src, dst)``.

    Each side is a buffer, a region (``A[0:32, k:k + 16]``) or an element naming the corner of a
    tile whose extent is the other side's shape (``T.copy(A[by * 32, k * 16], A_shared)``). Two
    elements copy one element (``T.copy(A[i], B[j])`` is ``B[j] = A[i]``, as in TileLang).
    TileLang's hints (``coalesced_width``, ``disable_tma``, ``eviction_policy``,
    ``prefer_instruction``, ``annotations``, ``loop_layout``) are accepted and do not change the
    copy.
    Extents must match (dimensions of size 1 are ignored), except that a dynamic extent may differ
    from the other side's (``T.copy(A[0:n], A_shared)`` with a 1024-element ``A_shared``): then the
    common part, ``min`` of the two, is copied and the rest of the destination is left as it was.
    Values are converted to the destination dtype. Parts of the tile outside the destination buffer are not written; parts
    outside the source buffer are not read and the destination gets 0 there (so partial tiles at
    the edges of a matrix feed zeros into ``T.gemm``).

    :raises LoweringError: extents, ranks or dtypes that do not fit (the message names the
        operands and the kernel line).
    """
    operands = (src, dst)
    s0 = as_tile("T.copy", operands, src, "source")
    d0 = as_tile("T.copy", operands, dst, "destination")
    if s0.kind == "element" and d0.kind == "element":
        # TileLang: two single elements are one store, dst[...] = src[...]
        if (s0.dtype == "bool") != (d0.dtype == "bool"):
            fail("T.copy", operands, f"dtype mismatch: cannot copy {s0.dtype} '{s0.name}' into {d0.dtype} '{d0.name}'")
        value = cast(s0.buffer[tuple(s0.starts)], d0.dtype)
        fill_value = safe_value(s0.buffer)
        if fill_value is not None:  # T.annotate_safe_value: guard the read (safe_value.py)
            inside = _element_inside(s0.buffer, s0.starts)
            if inside is not None:
                value = tirx.if_then_else(inside, value, cast(fill_value, d0.dtype))
        _B.buffer_store(d0.buffer, value, list(d0.starts))
        return
    s, d, guards = _resolve_copy(src, dst)
    extents, limits = _common_extents(s.squeezed, d.squeezed)
    fill_value = safe_value(s.buffer)

    def body(vs: list) -> None:
        src_ok = s.bounds_condition(vs)
        dst_ok = all_of([d.bounds_condition(vs), *(vs[k] < limit for k, limit in limits), *guards])
        value = cast(s.buffer[tuple(s.indices(vs))], d.dtype)
        if src_ok is not None:
            value = tirx.if_then_else(src_ok, value, zero(d.dtype) if fill_value is None else cast(fill_value, d.dtype))
        guarded(dst_ok, lambda: _B.buffer_store(d.buffer, value, d.indices(vs)))

    loop_nest(extents, parallel=not per_thread(d), body=body)


#: Scopes ``T.async_copy`` may write (TileLang's cp.async destinations).
ASYNC_COPY_DESTINATIONS = ("shared", "shared.dyn")


def async_copy(src: Any, dst: Any, *, coalesced_width: Any = None, annotations: Any = None, loop_layout: Any = None) -> None:
    """TileLang's explicitly asynchronous copy from global to shared memory: ``T.async_copy(A[by * 64, k * 32], A_s)``.

    TileLang issues cp.async instructions and leaves the wait to the kernel
    (``T.ptx_commit_group()``, ``T.ptx_wait_group(n)``). Here the copy is a :func:`copy`
    that has completed when the next statement runs, on every target, so a kernel that waits
    where TileLang needs it gets the same values (without the overlap of copy and compute),
    and the commit and wait statements have nothing left to do. Tiles, extents, guards and
    hints as :func:`copy`.

    :raises LoweringError: the source is not in global memory or the destination not in shared
        memory (use :func:`copy`), or what :func:`copy` refuses.
    """
    operands = (src, dst)
    s = as_tile("T.async_copy", operands, src, "source")
    d = as_tile("T.async_copy", operands, dst, "destination")
    if s.scope != "global" or d.scope not in ASYNC_COPY_DESTINATIONS:
        fail("T.async_copy", operands,
             f"T.async_copy only supports global->shared/shared.dyn copies, got {s.scope} '{s.name}' -> {d.scope} "
             f"'{d.name}'; use T.copy for this copy")
    check_options("T.async_copy", operands, annotations=annotations)
    copy(src, dst, coalesced_width=coalesced_width, annotations=annotations, loop_layout=loop_layout)


def ptx_commit_group() -> None:
    """TileLang's ``cp.async.commit_group``: closes a group of :func:`async_copy` copies.

    The copies have completed already here (see :func:`async_copy`), so this adds nothing to the
    kernel; accepted on every target.
    """


def ptx_wait_group(num: Any) -> None:
    """TileLang's ``cp.async.wait_group num``: waits until at most ``num`` groups of
    :func:`async_copy` copies are in flight. None are here (see :func:`async_copy`), so this adds
    nothing to the kernel; accepted on every target.

    :raises LoweringError: (a ``TypeError``) ``num`` is not an int >= 0 or an integer expression.
    """
    num = getattr(num, "scalar", num)  # T.alloc_var's wrapper
    dtype = str(getattr(getattr(num, "ty", None), "dtype", ""))
    value = None if isinstance(num, bool) else static_int(num)
    if (value is None and not dtype.startswith(("int", "uint"))) or (value is not None and value < 0):
        fail("T.ptx_wait_group", (num,), f"num must be an int >= 0 (the groups that may stay in flight), got {num!r}",
             OperandTypeError)


def fill(buffer: Any, value: Any, annotations: Any = None) -> None:
    """Set every element of a buffer or region to ``value``: ``T.fill(A_local, 0)``; a single
    element (``T.fill(count[0], 0)``) is a one-element region.

    ``value`` is a Python number or a scalar expression, converted to the buffer's dtype. Parts of
    a region outside the buffer are not written.

    :raises LoweringError: the operand is not a buffer or region, or ``value`` is not a scalar.
    """
    operands = (buffer, value)
    check_options("T.fill", operands, annotations=annotations)
    t = as_tile("T.fill", operands, buffer, "destination", allow_element=False, element_region=True)
    if is_buffer(value) or type(value).__name__ in ("TensorRegion",):
        fail("T.fill", operands, "value must be a scalar (a number or an expression), got a buffer or region")
    if not isinstance(value, (int, float, bool)) and getattr(getattr(value, "ty", None), "dtype", None) is None:
        fail("T.fill", operands, f"value must be a scalar (a number or an expression), got {type(value).__name__}")
    if isinstance(value, float) and not is_float(t.dtype):
        fail("T.fill", operands, f"dtype mismatch: cannot fill {t.dtype} '{t.name}' with the float {value!r}")
    v = number_constant("T.fill", operands, value, t.dtype) if isinstance(value, (int, float)) else cast(value, t.dtype)

    def body(vs: list) -> None:
        guarded(t.bounds_condition(vs), lambda: _B.buffer_store(t.buffer, v, t.indices(vs)))

    loop_nest(t.squeezed, parallel=not per_thread(t), body=body)


def clear(buffer: Any, annotations: Any = None) -> None:
    """Set every element of a buffer or region to 0: ``T.clear(C_local)`` (same as ``T.fill(buf, 0)``)."""
    check_options("T.clear", (buffer,), annotations=annotations)
    t = as_tile("T.clear", (buffer,), buffer, "destination", allow_element=False, element_region=True)
    v = zero(t.dtype)

    def body(vs: list) -> None:
        guarded(t.bounds_condition(vs), lambda: _B.buffer_store(t.buffer, v, t.indices(vs)))

    loop_nest(t.squeezed, parallel=not per_thread(t), body=body)
