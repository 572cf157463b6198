"""What the checks of lowering/checked_divisions.py cost: integer division kernels with and without them.

Each kernel is compiled twice in this process (the kernel cache off): once as the pipeline builds
it, and once with :func:`check_divisions` replaced by the identity, which is the kernel as it was
before the checks (it stops the process with SIGFPE on a 0 divisor; the operands here have none).
Both are timed against torch's ``//`` of the same tensors. Ratios only; run
``python bench/checked_divisions.py``.
"""

from __future__ import annotations

import argparse
import os

os.environ["TILELANG_DISABLE_CACHE"] = "1"  # both builds of a kernel have one cache key

import torch  # noqa: E402

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang_core.lowering import checked_divisions  # noqa: E402
from timing import best_time  # noqa: E402 - bench/timing.py

BLOCK = 1024


def by_tensor():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "int32"), B: T.Tensor((n,), "int32"), C: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                C[bx * BLOCK + i] = A[bx * BLOCK + i] // B[bx * BLOCK + i]

    return k


def by_scalar():
    n = T.dynamic("n")

    @T.prim_func
    def k(A: T.Tensor((n,), "int32"), s: T.int32, C: T.Tensor((n,), "int32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                C[bx * BLOCK + i] = A[bx * BLOCK + i] // s

    return k


def _compile(make, backend: str, target: str, checked: bool):
    original = checked_divisions.check_divisions
    if not checked:
        checked_divisions.check_divisions = lambda func, form, location: func
    try:
        return tilelang.compile(make(), target=target, execution_backend=backend)
    finally:
        checked_divisions.check_divisions = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--size", type=int, default=1 << 22)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-10**6, 10**6, (args.size,), dtype=torch.int32, generator=gen)
    b = torch.randint(1, 1000, (args.size,), dtype=torch.int32, generator=gen)
    b[::2] = -b[::2]
    c, s = torch.empty_like(a), 7
    cases = [
        ("A // B", by_tensor, (a, b, c), lambda: torch.floor_divide(a, b, out=c)),
        ("A // s (scalar)", by_scalar, (a, s, c), lambda: torch.floor_divide(a, s, out=c)),
    ]
    print(f"{'kernel':18} {'path':14} {'checked/torch':>14} {'unchecked/torch':>16} {'checked/unchecked':>18}")
    for name, make, operands, reference in cases:
        for backend, target in (("cython", "c"), ("tvm_ffi", "llvm")):
            checked = _compile(make, backend, target, True)
            plain = _compile(make, backend, target, False)
            t_ref = best_time(reference, args.reps)
            t_checked = best_time(lambda: checked(*operands), args.reps)
            t_plain = best_time(lambda: plain(*operands), args.reps)
            print(f"{name:18} {backend + '-' + target:14} {t_checked / t_ref:14.2f} {t_plain / t_ref:16.2f} "
                  f"{t_checked / t_plain:18.2f}")


if __name__ == "__main__":
    main()
