"""CPU kernels with a local variable against the same kernel written without one, per backend.

An elementwise uint32 hash over ``--n`` elements is written twice: with a local variable
(``v = X[i] * c``, used twice) and with the expression repeated instead. Both are compiled for
every CPU (backend, target) pair installed (cython/c, tvm_ffi/c, tvm_ffi/llvm); a torch version of
the same hash is the reference, timed in the same run. Each figure is the median of ``--repeat``
calls after a warm-up call.

Printed: milliseconds, the ratio with-variable/without (1.0: the variable costs nothing; runtime
modules used to allocate it through TVM's workspace pool once per element, see
lowering/stack_buffers.py) and each kernel against torch. Results are checked against torch.

    python bench/cpu_local_variables.py [--n 1048576] [--block 1024] [--repeat 21]
"""

from __future__ import annotations

import argparse
import statistics
import time

MUL, MIX = 2654435761, 0x45D9F3B


def _kernels(n: int, block: int):
    import tilelang.language as T

    @T.prim_func
    def with_variable(X: T.Tensor((n,), T.uint32), Y: T.Tensor((n,), T.uint32)):
        with T.Kernel(n // block, threads=block) as bx:
            for i in T.Parallel(block):
                v = X[bx * block + i] * T.uint32(MUL)
                Y[bx * block + i] = (v ^ (v >> 16)) * T.uint32(MIX)

    @T.prim_func
    def without_variable(X: T.Tensor((n,), T.uint32), Y: T.Tensor((n,), T.uint32)):
        with T.Kernel(n // block, threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = ((X[bx * block + i] * T.uint32(MUL))
                                     ^ ((X[bx * block + i] * T.uint32(MUL)) >> 16)) * T.uint32(MIX)

    return with_variable, without_variable


def _median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _pairs():
    from tilelang_core.backends import get_registry

    names = set(get_registry().names())
    pairs = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]
    return [(b, t) for b, t in pairs if b in names]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args()
    if args.n % args.block:
        ap.error(f"--n ({args.n}) must be a multiple of --block ({args.block})")
    import torch

    import tilelang

    x = torch.randint(0, 2**32, (args.n,), dtype=torch.int64)
    mask = 0xFFFFFFFF
    v = (x * MUL) & mask
    want = (((v ^ (v >> 16)) * MIX) & mask).to(torch.uint32)
    xs = x.to(torch.uint32)

    def ref():
        w = (x * MUL) & mask
        return (((w ^ (w >> 16)) * MIX) & mask).to(torch.uint32)

    t_ref = _median_ms(ref, args.repeat)
    with_var, without_var = _kernels(args.n, args.block)
    print(f"n={args.n} block={args.block} (uint32 hash; median of {args.repeat}); torch {t_ref:.3f} ms")
    print(f"{'backend/target':16s} {'variable ms':>12s} {'no variable ms':>15s} {'variable/none':>14s} {'variable/torch':>15s}")
    for backend, target in _pairs():
        times = []
        for func in (with_var, without_var):
            kernel = tilelang.compile(func, target=target, execution_backend=backend)
            y = torch.zeros(args.n, dtype=torch.uint32)
            kernel(xs, y)
            assert torch.equal(y, want), f"{backend}/{target} {func.__name__} differs from torch"
            times.append(_median_ms(lambda k=kernel, y=y: k(xs, y), args.repeat))
        print(f"{backend + '/' + target:16s} {times[0]:12.3f} {times[1]:15.3f} {times[0] / times[1]:14.2f} "
              f"{times[0] / t_ref:15.2f}")


if __name__ == "__main__":
    main()
