"""Kernels of the warp/thread-index helper and barrier tests (tests/test_warp_helpers.py), also
built by the GPU check kit (scripts/gpu_kit/compat_cases.py, cases ``compat.warp_*``).

Not a test module (no ``test_`` prefix): the test files and the kit load it by path.
"""

from __future__ import annotations

import tilelang.language as T

#: Threads of :func:`warp_indices` (x, y, z): 128 threads, 4 warps, a z axis.
INDEX_THREADS = (16, 4, 2)
#: Columns of :func:`warp_indices`'s output.
INDEX_COLUMNS = 10


def warp_indices(blocks=2):
    """Every thread index helper, block barriers and a warp barrier, thread by thread.

    ``I[g, :]`` of the thread with block-linear id ``tid`` in block ``bx`` (``g = bx*128 + tid``,
    ``tid = x + 16*y + 64*z``): lane (32), lane (16), warp (32), warp_sync (16), group (32 x 4),
    group (16 x 2), ``elect(64) + 2*elect(0) + 4*elect(1)``, warp of a warp size given by an
    expression (``8 * (bx + 1)``), ``A`` of thread ``127 - tid`` exchanged through shared memory
    after ``T.sync_threads()``, then ``3 * A`` of thread ``tid ^ 1`` after a named barrier
    (``T.sync_threads(1, 128)``), ``T.sync_threads(2)`` and ``T.sync_warp()``.
    """
    n = blocks * 128

    @T.prim_func
    def warp_index_kernel(A: T.Tensor((n,), "int32"), I: T.Tensor((n, INDEX_COLUMNS), "int32")):
        with T.Kernel(blocks, threads=INDEX_THREADS) as bx:
            s = T.alloc_shared((128,), "int32")
            tid = T.get_thread_binding(0) + T.get_thread_binding(1) * 16 + T.get_thread_binding(2) * 64
            g = bx * 128 + tid
            I[g, 0] = T.get_lane_idx()
            I[g, 1] = T.get_lane_idx(16)
            I[g, 2] = T.get_warp_idx()
            I[g, 3] = T.get_warp_idx_sync(16)
            I[g, 4] = T.get_warp_group_idx()
            I[g, 5] = T.get_warp_group_idx(16, 2)
            I[g, 6] = (T.cast(T.shuffle_elect(64), "int32") + T.cast(T.shuffle_elect(0), "int32") * 2
                       + T.cast(T.shuffle_elect(1), "int32") * 4)
            I[g, 7] = T.get_warp_idx(8 * (bx + 1))
            s[tid] = A[g]
            T.sync_threads()
            I[g, 8] = s[127 - tid]
            T.sync_threads(1, 128)
            s[tid] = A[g] * 3
            T.sync_threads(2)
            T.sync_warp()
            I[g, 9] = s[tid ^ 1]

    return warp_index_kernel


def warp_indices_reference(a):
    """What :func:`warp_indices` gives, thread by thread (``a``: the int32 input)."""
    import torch

    vals = a.long().tolist()
    rows = []
    for g in range(len(vals)):
        bx, tid = divmod(g, 128)
        elect = int(tid % 64 == 0) + 2 * int(tid == 0) + 4
        rows.append([tid % 32, tid % 16, tid // 32, tid // 16, tid // 128, tid // 32, elect, tid // (8 * (bx + 1)),
                     vals[bx * 128 + 127 - tid], 3 * vals[bx * 128 + (tid ^ 1)]])
    return torch.tensor(rows, dtype=torch.int32)


def warp_reduce(dtype, threads=64):
    """``O[t, :]``: sum, max and min (and for integers bitwise and, or) of ``X`` over the warp of
    thread ``t``, from ``T.warp_reduce_*``."""
    integer = dtype.startswith(("int", "uint"))
    cols = 5 if integer else 3

    @T.prim_func
    def warp_reduce_kernel(X: T.Tensor((threads,), dtype), O: T.Tensor((threads, cols), dtype)):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            v = X[tx]
            O[tx, 0] = T.warp_reduce_sum(v)
            O[tx, 1] = T.warp_reduce_max(v)
            O[tx, 2] = T.warp_reduce_min(v)
            if integer:
                O[tx, 3] = T.warp_reduce_bitand(v)
                O[tx, 4] = T.warp_reduce_bitor(v)

    return warp_reduce_kernel


def warp_reduce_reference(x):
    """What :func:`warp_reduce` gives, lane by lane: each warp's reduction on each of its lanes.
    Float max/min ignore NaN lanes (``fmaxf``/``fminf``); integer sums wrap in the dtype."""
    import functools

    import torch

    integer = not x.dtype.is_floating_point
    out = []
    for w in range(x.shape[0] // 32):
        lanes = x[w * 32:(w + 1) * 32]
        if integer:
            vals = lanes.long().tolist()
            bits = torch.iinfo(x.dtype).bits
            signed = torch.iinfo(x.dtype).min < 0
            total = sum(vals) % (1 << bits)
            if signed and total >= 1 << (bits - 1):
                total -= 1 << bits
            row = [total, max(vals), min(vals), functools.reduce(lambda p, q: p & q, vals),
                   functools.reduce(lambda p, q: p | q, vals)]
            out += [row] * 32
        else:
            wide = lanes.double()
            finite = wide[~torch.isnan(wide)]
            mx = finite.max().item() if finite.numel() else float("nan")
            mn = finite.min().item() if finite.numel() else float("nan")
            out += [[wide.sum().item(), mx, mn]] * 32
    if integer:
        return torch.tensor(out, dtype=torch.int64).to(x.dtype)
    return torch.tensor(out, dtype=torch.float64).to(x.dtype)


def barriers(n, block=64, dynamic=False):
    """``B[g] = 2 * A[start + block - 1 - i] + A[g]`` (``A`` read as 0 past its end), exchanged
    through shared memory around ``T.sync_threads()``, ``T.sync_warp()`` and a named barrier; on
    CPU targets the barriers do nothing and the result is the same."""
    N = T.dynamic("n") if dynamic else n

    @T.prim_func
    def barrier_kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            s = T.alloc_shared((block,), "float32")
            t = T.alloc_shared((block,), "float32")
            for i in T.Parallel(block):
                s[i] = T.if_then_else(bx * block + i < N, A[bx * block + i], T.float32(0))
            T.sync_threads()
            for i in T.Parallel(block):
                t[i] = s[block - 1 - i] * 2
            T.sync_warp()
            T.sync_threads(1, block)
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = t[i] + s[i]

    return barrier_kernel


def barriers_reference(a, block=64):
    """What :func:`barriers` gives."""
    import torch

    n = a.shape[0]
    padded = torch.zeros((n + block - 1) // block * block, dtype=a.dtype)
    padded[:n] = a
    rev = padded.reshape(-1, block).flip(1).reshape(-1)[:n]
    return 2 * rev + a
