"""Kernels of the TileLang-compatibility operator tests (issue 13), shared by the CPU tests
(tests/test_tileops_compat.py) and the CUDA tests (tests/test_tileops_compat_cuda.py).

Every kernel bundles several operators so that each compile checks many of them. ``dynamic=True``
makes the leading size a ``T.dynamic`` symbol. Not a test module (no ``test_`` prefix): the test
files load it by path.
"""

from __future__ import annotations

import tilelang.language as T
from tvm.tirx.script.builder import ir as _B

BLOCK = 64


def _n(n, dynamic, name="n"):
    return T.dynamic(name) if dynamic else n


def atomics(n, dtype, dynamic=False, bitwise=True):
    """Every block folds its ``BLOCK`` elements of ``A`` into shared cells with atomics.

    ``C[0] += a``, ``C[1] = max``, ``C[2] = min`` (element form, memory orders), bitwise
    ``C[3] |= a``, ``C[4] &= a``, ``C[5] ^= a`` (int dtypes), ``P[i] = prev of C[6] += a``
    (``return_prev``), the tile form ``S += A[block]`` (region + tile), ``G[0:2]``/``G[2:6]``
    through ``atomic_addx2``/``atomic_addx4`` (by one lane of each block), and in block 0 ``E[0] = atomic_load(E[1]) + 1``
    through ``atomic_store``.
    """
    N = _n(n, dynamic)

    @T.prim_func
    def atomics_kernel(
        A: T.Tensor((N,), dtype),
        C: T.Tensor((8,), dtype),
        P: T.Tensor((N,), dtype),
        S: T.Tensor((BLOCK,), dtype),
        G: T.Tensor((8,), dtype),
        E: T.Tensor((2,), dtype),
    ):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    T.atomic_add(C[0], A[bx * BLOCK + i])
                    T.atomic_max(C[1], A[bx * BLOCK + i], memory_order="acq_rel")
                    T.atomic_min(C[2], A[bx * BLOCK + i], memory_order="seq_cst")
                    if bitwise:
                        T.atomic_or(C[3], A[bx * BLOCK + i])
                        T.atomic_and(C[4], A[bx * BLOCK + i], memory_order="relaxed")
                        T.atomic_xor(C[5], A[bx * BLOCK + i])
                    P[bx * BLOCK + i] = T.atomic_add(C[6], A[bx * BLOCK + i], return_prev=True)
            T.atomic_add(S[0:BLOCK], A[bx * BLOCK : bx * BLOCK + BLOCK])
            for i in T.Parallel(BLOCK):
                # one lane per block: outside a T.Parallel loop a statement runs once per *thread*
                # on GPUs (64 times here) and once per block on CPUs
                if i == 0 and bx * BLOCK + 6 <= N:
                    T.atomic_addx2(G[0:2], A[bx * BLOCK : bx * BLOCK + 2])
                    T.atomic_addx4(G[2], A[bx * BLOCK + 2 : bx * BLOCK + 6])
            if bx == 0:
                T.atomic_store(E[0], T.atomic_load(E[1], memory_order="acquire") + 1, memory_order="release")

    return atomics_kernel


def vector_prev(n, dtype, dynamic=False):
    """``return_prev=True`` on the vector atomics: block ``b`` adds ``V[b, 0:2]`` to ``Acc[0:2]``
    through ``atomic_addx2`` and ``V[b, 2:6]`` to ``Acc[2:6]`` through ``atomic_addx4``, and
    stores the 6 previous values into ``Prev[b, :]`` (``n`` blocks, run in parallel)."""
    N = _n(n, dynamic)

    @T.prim_func
    def vector_prev_kernel(V: T.Tensor((N, 6), dtype), Acc: T.Tensor((6,), dtype), Prev: T.Tensor((N, 6), dtype)):
        with T.Kernel(N, threads=1) as b:
            Prev[b, 0:2] = T.atomic_addx2(Acc[0:2], V[b, 0:2], return_prev=True)
            Prev[b, 2:6] = T.atomic_addx4(Acc[2:6], V[b, 2:6], return_prev=True)

    return vector_prev_kernel


def reductions(m, n, bm, dtype, dynamic=False, style="cpu"):
    """Bitwise reductions (int dtypes) or NaN-aware max/min/absmax (float dtypes) of (bm, n) row tiles.

    Int: ``O[:, 0] = and``, ``O[:, 1] = or``, ``O[:, 2] = xor``, ``O[:, 3] = xor`` with
    ``clear=False`` on a destination holding ``0x0F``. Float: ``O[:, 0..2] = max/min/absmax``
    ignoring NaN, ``O[:, 3..5]`` with ``nan_propagate=True``.
    """
    M = _n(m, dynamic, "m")
    integer = dtype.startswith(("int", "uint"))
    threads = 1 if style == "cpu" else 128

    def tile(shape):
        return T.alloc_local(shape, dtype) if style == "cpu" else T.alloc_fragment(shape, dtype)

    @T.prim_func
    def reductions_kernel(A: T.Tensor((M, n), dtype), O: T.Tensor((M, 6), dtype)):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            src = tile((bm, n))
            r0 = tile((bm,))
            r1 = tile((bm,))
            r2 = tile((bm,))
            r3 = tile((bm,))
            r4 = tile((bm,))
            r5 = tile((bm,))
            T.copy(A[bx * bm, 0], src)
            if integer:
                T.reduce_bitand(src, r0, dim=1)
                T.reduce_bitor(src, r1, dim=1)
                T.reduce_bitxor(src, r2, dim=1)
                T.fill(r3, 0x0F)
                T.reduce_bitxor(src, r3, dim=1, clear=False)
                T.fill(r4, 0)
                T.fill(r5, 0)
            else:
                T.reduce_max(src, r0, dim=1)
                T.reduce_min(src, r1, dim=1)
                T.reduce_absmax(src, r2, dim=1)
                T.reduce_max(src, r3, dim=1, nan_propagate=True)
                T.reduce_min(src, r4, dim=1, nan_propagate=True)
                T.reduce_absmax(src, r5, dim=1, nan_propagate=True, batch=2)
            for i in T.Parallel(bm):
                if bx * bm + i < M:
                    O[bx * bm + i, 0] = r0[i]
                    O[bx * bm + i, 1] = r1[i]
                    O[bx * bm + i, 2] = r2[i]
                    O[bx * bm + i, 3] = r3[i]
                    O[bx * bm + i, 4] = r4[i]
                    O[bx * bm + i, 5] = r5[i]

    return reductions_kernel


def scans(m, n, bm, dtype="float32", dynamic=False, style="cpu"):
    """Per (bm, n) tile: ``S0 = cumsum(dim=1)``, ``S1 = cumsum(dim=0, reverse)`` (into another
    tile), ``S2 = cummax(dim=1, reverse)`` in place; ``V = cumsum`` of the 1-D tile ``A[row 0]``."""
    M = _n(m, dynamic, "m")
    threads = 1 if style == "cpu" else 128

    def tile(shape):
        return T.alloc_local(shape, dtype) if style == "cpu" else T.alloc_shared(shape, dtype)

    def frag(shape):
        return T.alloc_local(shape, dtype) if style == "cpu" else T.alloc_fragment(shape, dtype)

    @T.prim_func
    def scans_kernel(
        A: T.Tensor((M, n), dtype),
        S0: T.Tensor((M, n), dtype),
        S1: T.Tensor((M, n), dtype),
        S2: T.Tensor((M, n), dtype),
        V: T.Tensor((M, n), dtype),
    ):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            t = tile((bm, n))
            f = frag((bm, n))
            u = tile((bm, n))
            row = tile((n,))
            T.copy(A[bx * bm, 0], t)
            T.copy(A[bx * bm, 0], f)
            T.copy(A[bx * bm, 0], row)
            T.cumsum(t, dim=1)
            T.copy(t, S0[bx * bm, 0])
            T.copy(A[bx * bm, 0], t)
            T.cumsum(src=t, dst=u, dim=0, reverse=True)
            T.copy(u, S1[bx * bm, 0])
            T.cummax(f, dim=-1, reverse=True)
            T.copy(f, S2[bx * bm, 0])
            T.cumsum(row)
            T.copy(row, V[bx * bm, 0])

    return scans_kernel


def layout(b, m, n, dynamic=False, style="cpu"):
    """``Tr = transpose(A)`` (last two axes) plus an edge case: a region that overhangs the
    destination; ``R = reshape(A)`` read as (b, m * n); ``Bits = view(A, int32)``."""
    B = _n(b, dynamic, "b")
    threads = 1 if style == "cpu" else 128

    @T.prim_func
    def layout_kernel(
        A: T.Tensor((B, m, n), "float32"),
        Tr: T.Tensor((B, n, m), "float32"),
        Edge: T.Tensor((B, n, m), "float32"),
        R: T.Tensor((B, m * n), "float32"),
        Bits: T.Tensor((B, m, n), "int32"),
    ):
        with T.Kernel(B, threads=threads) as bx:
            T.transpose(A[bx : bx + 1, 0:m, 0:n], Tr[bx : bx + 1, 0:n, 0:m])
            T.fill(Edge[bx : bx + 1, 0:n, 0:m], -1.0)
            # the destination region overhangs Edge by one column: that column is not written
            T.transpose(A[bx : bx + 1, 1:m, 0:n], Edge[bx : bx + 1, 0:n, 2 : m + 1])
            flat = T.reshape(A, [B, m * n])
            bits = T.view(A, [B, m, n], dtype="int32")
            for i, j in T.Parallel(m, n):
                R[bx, i * n + j] = flat[bx, i * n + j]
                Bits[bx, i, j] = bits[bx, i, j]

    return layout_kernel


def variables(n, dynamic=False):
    """``T.alloc_var``: a running total reassigned in a loop, an initialized var read by every
    element; ``T.alloc_global``: a workspace written and read back."""
    N = _n(n, dynamic)

    @T.prim_func
    def variables_kernel(A: T.Tensor((N,), "int32"), O: T.Tensor((N,), "int32"), Tot: T.Tensor((1,), "int32")):
        W = T.alloc_global((N,), "int32")
        with T.Kernel(1, threads=1) as _:
            total = T.alloc_var("int32", init=0)
            bias = T.alloc_var(T.int32, 100)
            for i in T.serial(N):
                total = total + A[i]
                W[i] = A[i] * 2
            for i in T.serial(N):
                O[i] = W[i] + bias
            Tot[0] = total

    return variables_kernel


def math(n, dtype="float32", dynamic=False):
    """Fast math, fast_rcp, clamp (NaN propagates), align_up (on ints) and dp4a."""
    N = _n(n, dynamic)

    @T.prim_func
    def math_kernel(
        A: T.Tensor((N,), dtype),
        F: T.Tensor((N, 10), dtype),
        Q: T.Tensor((N, 4), "int8"),
        D: T.Tensor((N,), "int32"),
        U: T.Tensor((N,), "int32"),
    ):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                g = bx * BLOCK + i
                if g < N:
                    x = A[g]
                    F[g, 0] = T.__exp(x)
                    F[g, 1] = T.__exp10(x)
                    F[g, 2] = T.__log(T.max(x, -x) + T.cast(1, dtype))
                    F[g, 3] = T.__log2(T.max(x, -x) + T.cast(1, dtype))
                    F[g, 4] = T.__log10(T.max(x, -x) + T.cast(1, dtype))
                    F[g, 5] = T.__tan(x)
                    F[g, 6] = T.__cos(x)
                    F[g, 7] = T.__sin(x)
                    F[g, 8] = T.fast_rcp(x + T.cast(4, dtype))
                    F[g, 9] = T.clamp(x, -0.5, 0.5)
                    U[g] = T.align_up(g, 8)
                    D[g] = g
                    T.dp4a(Q[g, 0], Q[g, 0], D[g])

    return math_kernel


IEEE_OPS = ("add", "sub", "mul", "fdiv", "frcp", "fsqrt", "fmaf", "frsqrt")
ROUNDING = ("rn", "rz", "ru", "rd")


def _apply_ieee(op, mode, a, b, c):
    """``T.ieee_<op>`` on the operands it takes, rounded with ``mode`` (frsqrt: to nearest)."""
    if op == "frsqrt":
        return T.ieee_frsqrt(a)
    fn = getattr(T, "ieee_" + op)
    if op in ("frcp", "fsqrt"):
        return fn(a, mode)
    if op == "fmaf":
        return fn(a, b, c, mode)
    return fn(a, b, mode)


def ieee(n, dtype="float32", dynamic=False, modes=ROUNDING):
    """Every IEEE operation in every rounding mode of ``modes``: ``O[i, op * len(modes) + mode]``."""
    N = _n(n, dynamic)
    ops = IEEE_OPS

    def store_all(O, g, a, b, c):
        # a Python loop run while the kernel is parsed: one store per (operation, mode)
        for op in ops:
            for r, mode in enumerate(modes):
                _B.buffer_store(O, _apply_ieee(op, mode, a, b, c), [g, IEEE_OPS.index(op) * len(modes) + r])

    @T.prim_func
    def ieee_kernel(
        A: T.Tensor((N,), dtype),
        B: T.Tensor((N,), dtype),
        C: T.Tensor((N,), dtype),
        O: T.Tensor((N, len(IEEE_OPS) * len(modes)), dtype),
    ):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                g = bx * BLOCK + i
                if g < N:
                    store_all(O, g, A[g], B[g], C[g])

    return ieee_kernel


def ieee_half(n, dtype="float16", dynamic=False):
    """Every IEEE operation of 16-bit floats in the one mode they have (round to nearest):
    ``O[i, op]``, in the order of :data:`IEEE_OPS`."""
    return ieee(n, dtype, dynamic, modes=("rn",))


def vectors(n, dtype="float16"):
    """``T.add2``/``sub2``/``mul2``/``fma2``/``max2``/``min2``/``abs2`` and ``T.extract_lane`` on
    two-lane values loaded with ``T.Ramp`` (targets llvm and cuda)."""
    vdt = dtype + "x2"

    @T.prim_func
    def vectors_kernel(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), O: T.Tensor((8, n), dtype), L: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=1) as _:
            for k in T.serial(n // 2):
                a = A[T.Ramp(2 * k, 1, 2)]
                b = B[T.Ramp(2 * k, 1, 2)]
                O[0, T.Ramp(2 * k, 1, 2)] = T.add2(a, b)
                O[1, T.Ramp(2 * k, 1, 2)] = T.sub2(a, b)
                O[2, T.Ramp(2 * k, 1, 2)] = T.mul2(a, b)
                O[3, T.Ramp(2 * k, 1, 2)] = T.fma2(a, b, a)
                O[4, T.Ramp(2 * k, 1, 2)] = T.max2(a, b)
                O[5, T.Ramp(2 * k, 1, 2)] = T.min2(a, b)
                O[6, T.Ramp(2 * k, 1, 2)] = T.abs2(a)
                O[7, T.Ramp(2 * k, 1, 2)] = a
                L[2 * k] = T.extract_lane(b, 1)
                L[2 * k + 1] = T.extract_lane(b, 0)

    assert vdt in ("float16x2", "float32x2", "bfloat16x2")
    return vectors_kernel


def gpu_only(n=256):
    """The GPU-only intrinsics (warp votes, shuffles, block votes, thread/block indices, __ldg)."""

    @T.prim_func
    def gpu_only_kernel(A: T.Tensor((n,), "float32"), I: T.Tensor((n,), "int32"), P: T.Tensor((n,), "int32"),
                        U: T.Tensor((n,), "uint64"), O: T.Tensor((n,), "float32")):
        with T.Kernel(n // BLOCK, threads=BLOCK) as _:
            for i in T.Parallel(BLOCK):
                g = T.get_block_binding() * BLOCK + T.get_thread_binding()
                v = I[g]
                P[g] = (
                    T.any_sync(v > 0) + T.all_sync(v > 0) * 2 + T.syncthreads_count(v > 0) * 4
                    + T.syncthreads_and(v) + T.syncthreads_or(v) + T.shfl_xor(v, 1) + T.shfl_down(v, 1)
                    + T.shfl_up(v, 1) + T.shfl_sync(v, 0) + T.cast(T.match_any_sync(v), "int32")
                    + T.cast(T.match_all_sync(v), "int32") + T.get_thread_binding(1) + i
                    + T.__ffs(v) + T.cast(T.__fns(T.cast(v, "uint32"), 0, 1), "int32")
                )
                U[g] = T.ballot_sync(v > 0) + T.ballot(v > 1) + T.activemask()
                O[g] = T.__ldg(A[g]) + T.__ldg(A, g)

    return gpu_only_kernel


def reducers(m, n, threads=128):
    """Row sums and maxima with reducers: v1 (``replication="all"``, plain ``+=``, in place) and
    v2 (``reducer_init`` with a seed, ``reducer_update``, ``finalize_reducer(acc, dst)``)."""

    @T.prim_func
    def reducers_kernel(A: T.Tensor((m, n), "float32"), S: T.Tensor((m,), "float32"), X: T.Tensor((m,), "float32"),
                        B: T.Tensor((m,), "int32"), I: T.Tensor((m, n), "int32")):
        with T.Kernel(1, threads=threads) as _:
            tile = T.alloc_fragment((m, n), "float32")
            T.copy(A, tile)
            total = T.alloc_reducer((m,), "float32", op="sum", replication="all")
            T.clear(total)
            for i, j in T.Parallel(m, n):
                total[i] += tile[i, j]
            T.finalize_reducer(total)
            T.copy(total, S)
            mx = T.alloc_reducer((m,), "float32", op="max")
            T.reducer_init(mx, 0.5)
            for i, j in T.Parallel(m, n):
                T.reducer_update(mx[i], tile[i, j])
            out = T.alloc_fragment((m,), "float32")
            T.finalize_reducer(mx, out)
            T.copy(out, X)
            bits = T.alloc_reducer((m,), "int32", op="bitor")
            T.reducer_init(bits)
            for i, j in T.Parallel(m, n):
                T.reducer_update(bits[i], I[i, j])
            T.finalize_reducer(bits, B)

    return reducers_kernel
