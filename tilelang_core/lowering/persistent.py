"""``T.Persistent`` loops: the domain a persistent kernel's workers share, expanded into a wave loop.

``T.Persistent(domain, wave_size, index, group_size)`` is parsed as a marker statement
(:data:`~tilelang_core.language.core.PERSISTENT_MARKER`: ndim, wave size, index, group size)
followed by a plain loop nest over ``domain``. :func:`expand_persistent_loops`, the first thing
the frontend does, replaces each such pair by::

    for w in range(ceildiv(tiles, wave_size)):      # tiles: the domain padded to whole groups
        t = w * wave_size + index                   # this worker's tile of wave w
        v[n-2], ..., v[0] = digits of t // G over (D[n-2], ..., D[0])
        v[n-1] = (t // (G * D[0] * ... * D[n-2])) * G + t % G
        if v[n-1] < D[n-1]:
            body

``G`` is the group size clamped to ``1..D[n-1]``. The tile numbers run over groups of ``G``
consecutive values of the last dimension: inside a group the last dimension varies fastest,
then the others, and the groups follow each other. A tile number past the padded domain has a
group past the last one, so the one guard on ``v[n-1]`` also ends the last wave. The original loop
variables become the bound coordinates, so the body is unchanged.
"""

from __future__ import annotations

from typing import Any, Optional

from tvm import tirx

from ..errors import LoweringError
from ..language.core import PERSISTENT_MARKER
from .markers import marker_args

__all__ = ["expand_persistent_loops"]


def _marker(stmt: Any) -> Optional[list]:
    """The arguments ``[ndim, wave_size, index, group_size]`` of a marker statement, else None."""
    return marker_args(stmt, PERSISTENT_MARKER, 4)


def _cast(dtype: str, value: Any) -> Any:
    return value if value.dtype == dtype else tirx.Cast(dtype, value)


def _expand(marker: list, nest: Any, location: str) -> Any:
    ndim = int(marker[0].value)
    loops = []
    stmt = nest
    for _ in range(ndim):
        if not isinstance(stmt, tirx.For):
            raise LoweringError(f"{location}: T.Persistent over {ndim} extents must be followed by its loop nest")
        loops.append(stmt)
        stmt = stmt.body
    body = stmt
    dtype = "int64" if any(loop.loop_var.dtype == "int64" for loop in loops) else "int32"
    extents = [_cast(dtype, loop.extent) for loop in loops]
    wave, index = _cast(dtype, marker[1]), _cast(dtype, marker[2])
    one = tirx.IntImm(dtype, 1)
    last = extents[-1]
    group = tirx.max(one, tirx.min(_cast(dtype, marker[3]), last))

    ceildiv = lambda a, b: tirx.floordiv(a + b - one, b)  # noqa: E731 - extents and sizes are positive
    tiles = ceildiv(last, group) * group
    for extent in extents[:-1]:
        tiles = tiles * extent
    w = tirx.Var("persistent_wave", dtype)
    tile = tirx.Var("persistent_tile", dtype)

    binds = [tirx.Bind(tile, w * wave + index)]
    rest = tirx.floordiv(tile, group)
    for loop, extent in reversed(list(zip(loops[:-1], extents[:-1]))):
        binds.append(tirx.Bind(loop.loop_var, _cast(loop.loop_var.dtype, tirx.floormod(rest, extent))))
        rest = tirx.floordiv(rest, extent)
    last_var = loops[-1].loop_var
    binds.append(tirx.Bind(last_var, _cast(last_var.dtype, rest * group + tirx.floormod(tile, group))))
    guarded = tirx.IfThenElse(_cast(dtype, last_var) < last, body, None)
    waves = ceildiv(tiles, wave)
    if not isinstance(wave, tirx.IntImm):  # T.Persistent asserts a run-time wave size >= 1: none ran below
        waves = tirx.Select(tirx.GE(wave, one), ceildiv(tiles, tirx.max(wave, one)), tirx.IntImm(dtype, 0))
    wave_loop = tirx.For(w, tirx.IntImm(dtype, 0), waves, tirx.ForKind.SERIAL,
                         tirx.SeqStmt([*binds, guarded]))
    return wave_loop


def expand_persistent_loops(func: tirx.PrimFunc, location: str = "<unknown>") -> tirx.PrimFunc:
    """``func`` with every ``T.Persistent`` marker and loop nest expanded (module docstring)."""
    from .atomics import checked_map

    misplaced = f"{location}: T.Persistent must be used as the loop of a for statement: 'for i, j in T.Persistent(...)'"

    def on_seq(node: Any) -> Any:
        seq = list(node.seq)
        if not any(_marker(s) is not None for s in seq):
            return node
        out, i = [], 0
        while i < len(seq):
            marker = _marker(seq[i])
            if marker is None:
                out.append(seq[i])
                i += 1
                continue
            if i + 1 >= len(seq):  # TVMScript always puts the loop nest right after the marker
                raise LoweringError(misplaced)
            out.append(_expand(marker, seq[i + 1], location))
            i += 2
        return out[0] if len(out) == 1 else tirx.SeqStmt(out)

    body = checked_map(func.body, [(tirx.SeqStmt, on_seq)], order="pre")
    if body.same_as(func.body):
        return func
    return func.with_body(body)
