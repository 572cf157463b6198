"""What the guards of lowering/access_guards.py cost: the same kernels with and without them.

Each kernel is compiled twice in this process, once as it is and once with
``tl.disable_safe_memory_legalize`` (no guards on the kernel's own global accesses), and both are
timed against the same torch operation. The kernels use dynamic shapes, so no guard can be proven
away at compile time; on CPU targets the loop nests are versioned (a guard-free copy for the
blocks inside the tensors). The gather reads its index from memory, which versioning cannot check
before the loop; its ``T.assume`` variant promises the index is inside and drops the guard
(the row ``gather + T.assume``). Ratios only; run ``python bench/access_guards.py``.
"""

from __future__ import annotations

import argparse

import torch

import tilelang
import tilelang.language as T
from timing import best_time  # bench/timing.py


def elementwise(block: int = 256):
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2.0 + B[bx * block + i]

    return k


def matmul(block_m: int = 16, n: int = 128, kk: int = 128):
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((m, kk), T.float32), B: T.Tensor((kk, n), T.float32), C: T.Tensor((m, n), T.float32)):
        with T.Kernel(T.ceildiv(m, block_m)) as bx:
            for i, j in T.Parallel(block_m, n):
                acc = T.alloc_var(T.float32, init=0.0)
                for p in T.serial(kk):
                    acc = acc + A[bx * block_m + i, p] * B[p, j]
                C[bx * block_m + i, j] = acc

    return k


def gather(assume: bool = False, block: int = 256):
    """``C[i] = A[Idx[i]]``; with ``assume``, ``T.assume(0 <= Idx[i] < n)`` first."""
    n = T.dynamic("n")
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((n,), T.float32), Idx: T.Tensor((m,), T.int32), C: T.Tensor((m,), T.float32)):
        with T.Kernel(T.ceildiv(m, block)) as bx:
            for i in T.serial(block):
                j = T.alloc_var(T.int32)
                j = Idx[bx * block + i]
                if assume:
                    T.assume(0 <= j and j < n)
                C[bx * block + i] = A[j]

    return k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    # sizes the tiles divide: the unguarded copies must not write past the tensors (the guarded
    # ones do not know that, their shapes are dynamic)
    size = 1_000_192
    a, b, c = torch.randn(size), torch.randn(size), torch.empty(size)
    ma, mb, mc = torch.randn(1008, 128), torch.randn(128, 128), torch.empty(1008, 128)
    idx = torch.randint(0, size, (size,), dtype=torch.int32)
    idx64, gc = idx.long(), torch.empty(size)
    cases = [
        ("elementwise n=1000192", elementwise, (a, b, c), lambda: torch.add(a * 2.0, b, out=c)),
        ("matmul 1008x128x128", matmul, (ma, mb, mc), lambda: torch.matmul(ma, mb, out=mc)),
        ("gather n=1000192", gather, (a, idx, gc), lambda: torch.index_select(a, 0, idx64, out=gc)),
        ("gather + T.assume", lambda: gather(assume=True), (a, idx, gc), lambda: torch.index_select(a, 0, idx64, out=gc)),
    ]
    print(f"{'kernel':24} {'path':12} {'guarded/torch':>14} {'unguarded/torch':>16} {'guarded/unguarded':>18}")
    for name, make, operands, reference in cases:
        for backend, target in (("cython", "c"), ("tvm_ffi", "llvm")):
            guarded = tilelang.compile(make(), target=target, execution_backend=backend)
            plain = tilelang.compile(make(), target=target, execution_backend=backend,
                                     pass_configs={"tl.disable_safe_memory_legalize": True})
            t_ref = best_time(reference, args.reps)
            t_guarded = best_time(lambda: guarded(*operands), args.reps)
            t_plain = best_time(lambda: plain(*operands), args.reps)
            print(f"{name:24} {backend + '-' + target:12} {t_guarded / t_ref:14.2f} {t_plain / t_ref:16.2f} "
                  f"{t_guarded / t_plain:18.2f}")


if __name__ == "__main__":
    main()
