"""``T.gemm``: ``C += A @ B`` on tiles."""

from __future__ import annotations

import enum
from typing import Any

from tvm.tirx.script.builder import ir as _B

from ._common import (
    ON_CHIP_SCOPES,
    OperandTypeError,
    as_tile,
    cast,
    check_options,
    disjoint,
    fail,
    guarded,
    is_float,
    is_unit,
    loop_nest,
    per_thread,
    same_extent,
    shape_text,
    static_int,
    storage_root,
    zero,
)


def _check_options(A: Any, B: Any, C: Any, policy: Any, clear_accum: Any, mbar: Any, annotations: Any,
                   transpose_A: Any = False, transpose_B: Any = False) -> Any:
    """``clear_accum`` as a bool or a boolean expression, after refusing ``T.gemm`` options of the
    wrong kind: an argument in the wrong position (``T.gemm(A, B, C, False, False, True)`` written
    for another argument order) is an error instead of a silently different product."""
    operands = (A, B, C)
    if policy is not None and (isinstance(policy, bool) or not isinstance(policy, (GemmWarpPolicy, int))):
        fail("T.gemm", operands, f"policy must be a T.GemmWarpPolicy (or None), got {policy!r}; the positional order is "
             "(A, B, C, transpose_A, transpose_B, policy, clear_accum) as in TileLang, so pass clear_accum= by keyword",
             OperandTypeError)
    if isinstance(policy, int) and not isinstance(policy, bool) and policy not in {int(p) for p in GemmWarpPolicy}:
        fail("T.gemm", operands, f"policy must be one of {', '.join(p.name for p in GemmWarpPolicy)}, got {policy!r}",
             OperandTypeError)
    check_options("T.gemm", operands, transpose_A=transpose_A, transpose_B=transpose_B)
    if isinstance(clear_accum, int) and not isinstance(clear_accum, GemmWarpPolicy) and clear_accum in (0, 1):
        clear_accum = bool(clear_accum)
    elif isinstance(clear_accum, GemmWarpPolicy) or str(getattr(clear_accum, "dtype", "")) != "bool":
        fail("T.gemm", operands, f"clear_accum must be a bool or a boolean expression (ko == 0), got {clear_accum!r}",
             OperandTypeError)
    if mbar is not None:
        fail("T.gemm", operands, "mbar= (a Blackwell TCGEN5MMA barrier) is not supported: this T.gemm completes "
             "before the next statement, so leave it out", OperandTypeError)
    check_options("T.gemm", operands, annotations=annotations)
    return clear_accum


class GemmWarpPolicy(enum.IntEnum):
    """``T.GemmWarpPolicy``: TileLang's choice of how a GPU ``T.gemm`` splits ``C`` among warps.

    Accepted as ``T.gemm(..., policy=T.GemmWarpPolicy.FullRow)`` for TileLang compatibility;
    TileLang-Core's ``T.gemm`` has no warp partitioning, so the policy has no effect
    (docs/compatibility.md).
    """

    Square = 0
    FullRow = 1
    FullCol = 2

    def is_square(self) -> bool:
        """Whether this is ``Square`` (warps spread over both dimensions of ``C``)."""
        return self is GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        """Whether this is ``FullRow`` (every warp on its own rows of ``C``)."""
        return self is GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        """Whether this is ``FullCol`` (every warp on its own columns of ``C``)."""
        return self is GemmWarpPolicy.FullCol

    @classmethod
    def from_warp_partition(cls, m_warp: int, n_warp: int) -> "GemmWarpPolicy":
        """The policy that a grid of ``m_warp`` x ``n_warp`` warps describes, as TileLang names it:
        ``FullRow`` for a column of several warps (``(4, 1)``), ``FullCol`` for a row of them
        (``(1, 4)``), ``Square`` otherwise (``(2, 2)``, ``(1, 1)``)."""
        if m_warp > 1 and n_warp == 1:
            return cls.FullRow
        if m_warp == 1 and n_warp > 1:
            return cls.FullCol
        return cls.Square

    def compute_warp_partition(self, M: int, N: int, num_warps: int) -> tuple[int, int]:
        """``(m_warp, n_warp)``: how TileLang's CUDA ``T.gemm`` would split an ``M`` x ``N`` tile of
        ``C`` among ``num_warps`` warps under this policy (a warp takes at least 16 rows and 8
        columns), for code that derives tile configurations from it. TileLang-Core's ``T.gemm``
        does not use it. ``FullRow`` puts every warp on rows, or as many as ``M`` takes and the
        rest on columns; ``FullCol`` the same for columns; ``Square`` takes the exact split of
        ``num_warps`` whose per-warp tile is closest to ``C``'s aspect ratio (``(1, 1)`` if none
        fits)."""
        for name, value in (("M", M), ("N", N), ("num_warps", num_warps)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GemmWarpPolicy.compute_warp_partition: {name} must be a positive int, "
                                 f"got {value!r}")
        if self is GemmWarpPolicy.FullRow:
            if M % (num_warps * 16) == 0:
                return num_warps, 1
            m = max(M // 16, 1)
            return m, max(num_warps // m, 1)
        if self is GemmWarpPolicy.FullCol:
            if N % (num_warps * 8) == 0:
                return 1, num_warps
            n = max(N // 8, 1)
            return max(num_warps // n, 1), n
        best, best_gap = (1, 1), float("inf")
        for m in range(1, min(M // 16, num_warps) + 1):
            n = num_warps // m
            if m * n != num_warps or n > N // 8:
                continue
            gap = abs((M / (m * 16)) / (N / (n * 8)) - M / N)
            if gap < best_gap:
                best, best_gap = (m, n), gap
        return best


def gemm(
    A: Any,
    B: Any,
    C: Any,
    transpose_A: bool = False,
    transpose_B: bool = False,
    policy: Any = None,
    clear_accum: Any = False,
    k_pack: int = 1,
    wg_wait: int = 0,
    mbar: Any = None,
    annotations: Any = None,
) -> None:
    """Tile matrix multiply-accumulate: ``C += op(A) @ op(B)``, accumulating in ``C``'s dtype.

    ``A`` is ``(M, K)`` (``(K, M)`` with ``transpose_A``), ``B`` is ``(K, N)`` (``(N, K)`` with
    ``transpose_B``) and ``C`` is ``(M, N)``; each is a buffer or region (dimensions of size 1
    ignored) in ``shared``, ``local`` or fragment memory. Inputs are converted to ``C``'s dtype
    before multiplying, so float16 inputs with a float32 ``C`` accumulate in float32.
    ``clear_accum=True`` sets ``C`` to 0 first; a boolean expression (``clear_accum=ko == 0``)
    clears it where the expression holds at run time.
    The positional order is TileLang's: ``policy`` (a ``T.GemmWarpPolicy``) comes before
    ``clear_accum``. ``policy``, ``k_pack``, ``wg_wait`` and ``annotations`` are accepted for
    TileLang compatibility and do not change the product; ``mbar`` (a Blackwell TCGEN5MMA barrier)
    must be None.

    :raises LoweringError: wrong scope (global memory), rank, shapes or dtypes; an argument of
        the wrong kind (``OperandTypeError``), e.g. ``True`` in the ``policy`` position.
    """
    clear_accum = _check_options(A, B, C, policy, clear_accum, mbar, annotations, transpose_A, transpose_B)
    operands = (A, B, C)
    a = as_tile("T.gemm", operands, A, "A", allow_element=False)
    b = as_tile("T.gemm", operands, B, "B", allow_element=False)
    c = as_tile("T.gemm", operands, C, "C", allow_element=False)
    for role, t in (("A", a), ("B", b), ("C", c)):
        if t.scope not in ON_CHIP_SCOPES:
            fail(
                "T.gemm",
                operands,
                f"wrong scope: {role} '{t.name}' is in {t.scope} memory; gemm operands must be tiles in "
                "shared, local or fragment memory (T.alloc_shared / T.alloc_local / T.alloc_fragment); "
                f"T.copy the tile there first",
            )
        if len(t.squeezed) != 2 and not (len(t.extents) == 2):
            fail(
                "T.gemm",
                operands,
                f"rank mismatch: {role} '{t.name}' is a tile of extents {shape_text(t.extents)}; gemm needs "
                "2-D tiles (dimensions of size 1 in front are allowed)",
            )
    for role, t in (("A", a), ("B", b)):
        if t.buffer.same_as(c.buffer) and not disjoint(t, c):
            fail("T.gemm", operands, f"C '{c.name}' overlaps {role}: the product would overwrite {role}'s elements "
                 "before they are read; accumulate into another tile")
        if not t.buffer.same_as(c.buffer) and storage_root(t.buffer).same_as(storage_root(c.buffer)):
            # a T.view / T.reshape of C (or C of it): which elements meet cannot be told from the
            # regions; the product read C's elements as it updated them (c and llvm gave different values)
            fail("T.gemm", operands, f"C '{c.name}' and {role} '{t.name}' share storage (one is a T.view or T.reshape of "
                 f"the other): the product would overwrite {role}'s elements before they are read; accumulate into a "
                 "tile of its own")
    for t in (a, b, c):
        ext = t.squeezed if len(t.squeezed) == 2 else list(t.extents)
        t.mat = ext  # type: ignore[attr-defined]
    if a.dtype != b.dtype:
        fail("T.gemm", operands, f"dtype mismatch: A '{a.name}' is {a.dtype} but B '{b.name}' is {b.dtype}; they must match")
    if is_float(a.dtype) and not is_float(c.dtype):
        fail("T.gemm", operands, f"dtype mismatch: C '{c.name}' is {c.dtype} but the inputs are {a.dtype}; use a float accumulator")
    M, Ka = (a.mat[1], a.mat[0]) if transpose_A else (a.mat[0], a.mat[1])
    Kb, N = (b.mat[1], b.mat[0]) if transpose_B else (b.mat[0], b.mat[1])
    if not same_extent(Ka, Kb):
        fail(
            "T.gemm",
            operands,
            f"shape mismatch: A {shape_text(a.mat)}{' (transposed)' if transpose_A else ''} has K = {Ka} but "
            f"B {shape_text(b.mat)}{' (transposed)' if transpose_B else ''} has K = {Kb}",
        )
    if not (same_extent(c.mat[0], M) and same_extent(c.mat[1], N)):
        fail(
            "T.gemm",
            operands,
            f"shape mismatch: C '{c.name}' is {shape_text(c.mat)} but A @ B is ({M}, {N})",
        )

    def idx(t, r, s):
        # (row, col) of the 2-D view -> buffer indices
        full = []
        k = 0
        pos = [r, s]
        squeezed_view = len(t.squeezed) == 2
        for start, extent in zip(t.starts, t.extents):
            if squeezed_view and is_unit(extent):
                full.append(start)
                continue
            v = pos[k]
            k += 1
            full.append(v if static_int(start) == 0 else start + v)
        return tuple(full)

    acc = c.dtype

    def update(i, j, k):
        av = a.buffer[idx(a, k, i) if transpose_A else idx(a, i, k)]
        bv = b.buffer[idx(b, j, k) if transpose_B else idx(b, k, j)]
        ci = idx(c, i, j)
        _B.buffer_store(c.buffer, c.buffer[ci] + cast(av, acc) * cast(bv, acc), list(ci))

    if clear_accum is not False:

        def clear() -> None:
            loop_nest([M, N], parallel=not per_thread(c), body=lambda v: _B.buffer_store(c.buffer, zero(acc), list(idx(c, v[0], v[1]))))

        guarded(None if clear_accum is True else clear_accum, clear)
    if per_thread(c) and transpose_B and not transpose_A:
        # Whole product in every thread. B is (N, K): i-j-k order reads A and B along K, where
        # i-k-j read B with a stride of K elements per step (not vectorizable; 9x slower on c)
        with _B.serial(0, M) as i:
            with _B.serial(0, N) as j:
                with _B.serial(0, Ka) as k:
                    update(i, j, k)
    elif per_thread(c):
        # Whole product in every thread; i-k-j order keeps the innermost loop contiguous in B and C.
        # Target c widens a float16 B once per gemm (lowering/cpu_gemm_tiles.py); others drop the mark.
        with _B.serial(0, M, annotations={CPU_LOCAL_GEMM: 1}) as i:
            with _B.serial(0, Ka) as k:
                with _B.serial(0, N) as j:
                    update(i, j, k)
    else:
        # K outermost, then a T.Parallel nest over C: every (i, j) of C is updated by the thread
        # that owns it (fragment layout) and the innermost loop runs along C's rows on CPU. Target
        # llvm runs it in vectorized groups of rows of C (lowering/cpu_gemm_tiles.py); A and B are
        # never on C's storage (refused above).
        with _B.serial(0, Ka, annotations={CPU_GEMM_TILES: 1}) as k:
            loop_nest([M, N], parallel=True, body=lambda v: update(v[0], v[1], k))


#: Loop annotation on the row loop (i, around k and j) of a ``T.gemm`` into a per-thread (local)
#: ``C`` whose ``A`` and ``B`` are not on C's storage. Target c reads a float16 B from a copy
#: widened once per gemm (lowering/cpu_gemm_tiles.py); every other target drops the mark.
CPU_LOCAL_GEMM = "tl.cpu_local_gemm"

#: Loop annotation on the K loop of a ``T.gemm`` into a shared or fragment ``C`` whose ``A`` and
#: ``B`` are not on C's storage. Target llvm runs such a product in vectorized groups
#: of rows of C (lowering/cpu_gemm_tiles.py); every other target drops the mark.
CPU_GEMM_TILES = "tl.cpu_gemm_tiles"
