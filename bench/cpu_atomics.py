"""CPU kernels with atomics: parallel blocks (real atomics) against the same kernel run serially.

A histogram kernel (``T.atomic_add`` into ``--bins`` counters; each block counts ``--block``
elements into a private copy, then adds it to the shared counters with one atomic per bin) and a
scatter-add kernel (one ``T.atomic_add`` per element into ``--bins`` floats) are compiled twice
with the cython backend for target ``c``: with parallel blocks (OpenMP, the default now that CPU
atomics are real atomics) and with ``tl.disable_parallel_blocks`` (one block after the other, which
is how kernels with atomics ran before). ``torch.bincount`` / ``Tensor.index_add_`` on the same
data are the reference, timed in the same run. Each figure is the median of ``--repeat`` calls.

Printed: milliseconds and the ratios serial/parallel (the parallelism atomics no longer cost;
bounded by the number of cores OpenMP gets) and ours/torch. Results are checked against torch.

    python bench/cpu_atomics.py [--n 4000000] [--bins 256] [--block 4096] [--repeat 7] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def _kernels(n: int, bins: int, block: int):
    import tilelang.language as T

    blocks = (n + block - 1) // block

    @T.prim_func
    def histogram(X: T.Tensor((n,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(blocks, threads=1) as bx:
            local = T.alloc_local((bins,), "int32")
            T.clear(local)
            for i in T.serial(block):
                if bx * block + i < n:
                    local[X[bx * block + i]] += 1
            for b in T.serial(bins):
                T.atomic_add(H[b], local[b])

    @T.prim_func
    def scatter_add(X: T.Tensor((n,), "int32"), V: T.Tensor((n,), "float32"), S: T.Tensor((bins,), "float32")):
        with T.Kernel(blocks, threads=1) as bx:
            for i in T.serial(block):
                if bx * block + i < n:
                    T.atomic_add(S[X[bx * block + i]], V[bx * block + i])

    return {"histogram": histogram, "scatter_add": scatter_add}


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4_000_000)
    ap.add_argument("--bins", type=int, default=256)
    ap.add_argument("--block", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS and torch threads (default: all cores)")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    import tilelang

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randint(0, args.bins, (args.n,), dtype=torch.int32)
    v = torch.rand(args.n, dtype=torch.float32)
    kernels = _kernels(args.n, args.bins, args.block)
    print(f"n={args.n} bins={args.bins} block={args.block} threads={args.threads or os.cpu_count()} "
          f"(target c, cython backend; median of {args.repeat})")
    print(f"{'kernel':12s} {'parallel ms':>12s} {'serial ms':>10s} {'torch ms':>9s} {'serial/parallel':>16s} {'parallel/torch':>15s}")
    for name, func in kernels.items():
        par = tilelang.compile(func, target="c", execution_backend="cython")
        ser = tilelang.compile(func, target="c", execution_backend="cython",
                               pass_configs={"tl.disable_parallel_blocks": True})
        if name == "histogram":
            out = torch.zeros(args.bins, dtype=torch.int32)

            def run(k, out=out):
                out.zero_()
                k(x, out)

            def ref():
                return torch.bincount(x, minlength=args.bins)

            run(par)
            assert torch.equal(out.long(), ref()), "parallel histogram differs from torch.bincount"
            run(ser)
            assert torch.equal(out.long(), ref()), "serial histogram differs from torch.bincount"
        else:
            out = torch.zeros(args.bins, dtype=torch.float32)
            idx = x.long()

            def run(k, out=out):
                out.zero_()
                k(x, v, out)

            def ref():
                return torch.zeros(args.bins, dtype=torch.float32).index_add_(0, idx, v)

            for k in (par, ser):
                run(k)
                torch.testing.assert_close(out, ref(), rtol=1e-4, atol=1e-2)
        t_par = _median_ms(lambda: run(par), args.repeat)
        t_ser = _median_ms(lambda: run(ser), args.repeat)
        t_ref = _median_ms(ref, args.repeat)
        print(f"{name:12s} {t_par:12.2f} {t_ser:10.2f} {t_ref:9.2f} {t_ser / t_par:16.2f} {t_par / t_ref:15.2f}")


if __name__ == "__main__":
    main()
