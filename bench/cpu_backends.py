"""CPU kernels on every installed CPU (backend, target) pair, as ratios to cython/c and to torch.

Usage::

    python bench/cpu_backends.py                 # all kernels, 9 rounds
    python bench/cpu_backends.py --repeat 15     # more rounds
    python bench/cpu_backends.py --threads 2     # TVM_NUM_THREADS for tvm_ffi (set before TVM starts)
    python bench/cpu_backends.py --check         # exit 1 when tvm_ffi/c is over 1.5x cython/c

Kernels: the examples' blocked matmul at 512x512x512 (compute-bound, parallel blocks, loops
written in the kernel), the same product with ``T.gemm`` on 64x64x32 tiles (vectorized rows of C on
llvm, lowering/cpu_gemm_tiles.py) and with ``transpose_B`` on 128x128x32 tiles (B copied
transposed per gemm, the same module), with float16 tiles into a float32 C (torch's reference: the
float32 matmul of the widened tensors; B widened per gemm on target c, the same module), the same with
every tile in ``T.alloc_local`` (upstream's CPU gemm: A and B widened per gemm on target c), an elementwise add through 32x32 shared/fragment tiles
(allocas on llvm, lowering/stack_buffers.py), a
row-wise softmax-like kernel over 4096x1024 (exp, reductions written as loops, parallel blocks),
a row sum and a row max over 4096x1024 with ``T.reduce_sum``/``T.reduce_max`` (partial results on
CPU, lowering/lane_reductions.py), column sums of 64 tiles of 1024x64 (row after row on CPU, the
same module) and an elementwise add over 2^22 floats (memory-bound). Each is compiled for cython/c, tvm_ffi/c and tvm_ffi/llvm
(those installed); torch computes the same result in the same run and is the reference.
Results are checked against torch first.

Timing: rounds in which every (kernel, pair) and torch are timed once each, interleaved so that
load spikes hit all alike; each figure is the median of the rounds. Printed: milliseconds, the
ratio to cython/c and the ratio to torch.

tvm_ffi runs a target-c kernel's parallel blocks on TVM's thread pool, which uses half the
hardware threads on x86 unless ``TVM_NUM_THREADS`` says otherwise (one on a 2-core machine);
cython/c uses its own pool sized by ``torch.get_num_threads()``. ``--threads`` sets
``TVM_NUM_THREADS`` for a like-for-like figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]
TARGET_TVMFFI_C = 1.5


def _kernels():
    import torch

    import tilelang.language as T

    sys.path.insert(0, str(_ROOT / "examples"))
    from matmul import matmul

    rows, cols = 4096, 1024

    @T.prim_func
    def row_softmax(X: T.Tensor((rows, cols), T.float32), Y: T.Tensor((rows, cols), T.float32)):
        with T.Kernel(rows // 16, threads=128) as bx:
            m = T.alloc_fragment((16,), T.float32)
            s = T.alloc_fragment((16,), T.float32)
            for i in T.serial(16):
                m[i] = -T.infinity(T.float32)
                s[i] = T.float32(0)
                for j in T.serial(cols):
                    m[i] = T.max(m[i], X[bx * 16 + i, j])
                for j in T.serial(cols):
                    s[i] = s[i] + T.exp(X[bx * 16 + i, j] - m[i])
                for j in T.Parallel(cols):
                    Y[bx * 16 + i, j] = T.exp(X[bx * 16 + i, j] - m[i]) / s[i]

    def tile_gemm(tile_m, tile_n, transpose_b=False, dtype=T.float32, local=False):
        """C = A @ B with T.gemm on (tile_m, tile_n, 32) tiles of ``dtype`` into a float32 C; B
        given as (N, K) with ``transpose_b``; ``local``: every tile in ``T.alloc_local`` (each
        thread's own C, the form of upstream's CPU gemm test)."""
        b_tile_shape = (tile_n, 32) if transpose_b else (32, tile_n)
        operand_tile = T.alloc_local if local else T.alloc_shared
        result_tile = T.alloc_local if local else T.alloc_fragment

        @T.prim_func
        def tile_gemm_kernel(A: T.Tensor((512, 512), dtype), B: T.Tensor((512, 512), dtype),
                             C: T.Tensor((512, 512), T.float32)):
            with T.Kernel(512 // tile_n, 512 // tile_m, threads=128) as (bx, by):
                a_tile = operand_tile((tile_m, 32), dtype)
                b_tile = operand_tile(b_tile_shape, dtype)
                c_tile = result_tile((tile_m, tile_n), T.float32)
                T.clear(c_tile)
                for ko in T.Pipelined(16, num_stages=1):
                    T.copy(A[by * tile_m, ko * 32], a_tile)
                    if transpose_b:
                        T.copy(B[bx * tile_n, ko * 32], b_tile)
                    else:
                        T.copy(B[ko * 32, bx * tile_n], b_tile)
                    T.gemm(a_tile, b_tile, c_tile, transpose_B=transpose_b)
                T.copy(c_tile, C[by * tile_m, bx * tile_n])

        return tile_gemm_kernel

    @T.prim_func
    def tile_add(A: T.Tensor((2048, 2048), T.float32), B: T.Tensor((2048, 2048), T.float32),
                 C: T.Tensor((2048, 2048), T.float32)):
        with T.Kernel(64, 64, threads=128) as (bx, by):
            a_tile = T.alloc_shared((32, 32), T.float32)
            b_tile = T.alloc_shared((32, 32), T.float32)
            c_tile = T.alloc_fragment((32, 32), T.float32)
            T.copy(A[by * 32, bx * 32], a_tile)
            T.copy(B[by * 32, bx * 32], b_tile)
            for i, j in T.Parallel(32, 32):
                c_tile[i, j] = a_tile[i, j] + b_tile[i, j]
            T.copy(c_tile, C[by * 32, bx * 32])

    def row_reduce(reduce):
        @T.prim_func
        def row_reduce_kernel(X: T.Tensor((rows, cols), T.float32), S: T.Tensor((rows,), T.float32)):
            with T.Kernel(rows // 16, threads=128) as bx:
                tile = T.alloc_fragment((16, cols), T.float32)
                results = T.alloc_fragment((16,), T.float32)
                T.copy(X[bx * 16, 0], tile)
                reduce(tile, results, dim=1)
                T.copy(results, S[bx * 16])

        return row_reduce_kernel

    @T.prim_func
    def column_sum(X: T.Tensor((64 * 1024, 64), T.float32), S: T.Tensor((64, 64), T.float32)):
        with T.Kernel(64, threads=128) as bx:
            tile = T.alloc_fragment((1024, 64), T.float32)
            sums = T.alloc_fragment((64,), T.float32)
            T.copy(X[bx * 1024, 0], tile)
            T.reduce_sum(tile, sums, dim=0)
            T.copy(sums, S[bx, 0])

    n = 1 << 22

    @T.prim_func
    def vector_add(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32), C: T.Tensor((n,), T.float32)):
        with T.Kernel(n // 4096, threads=128) as bx:
            for i in T.Parallel(4096):
                C[bx * 4096 + i] = A[bx * 4096 + i] + B[bx * 4096 + i]

    size = 512
    a, b = torch.randn(size, size), torch.randn(size, size)
    a16, b16 = a.half(), b.half()
    x = torch.randn(rows, cols)
    u, v = torch.randn(n), torch.randn(n)
    w, w2 = torch.randn(2048, 2048), torch.randn(2048, 2048)
    return [
        ("matmul 512^3", matmul(size, size, size), (a, b, torch.empty(size, size)),
         lambda out: torch.matmul(a, b, out=out), 2),
        ("T.gemm 512^3", tile_gemm(64, 64), (a, b, torch.empty(size, size)),
         lambda out: torch.matmul(a, b, out=out), 2),
        ("T.gemm 512^3, B transposed", tile_gemm(128, 128, True), (a, b.t().contiguous(), torch.empty(size, size)),
         lambda out: torch.matmul(a, b, out=out), 2),
        ("T.gemm 512^3, float16 into float32", tile_gemm(64, 64, dtype=T.float16), (a16, b16, torch.empty(size, size)),
         lambda out: torch.matmul(a16.float(), b16.float(), out=out), 2),
        ("T.gemm 512^3, float16 into float32, tiles in T.alloc_local", tile_gemm(64, 64, dtype=T.float16, local=True),
         (a16, b16, torch.empty(size, size)), lambda out: torch.matmul(a16.float(), b16.float(), out=out), 2),
        ("row softmax 4096x1024", row_softmax, (x, torch.empty(rows, cols)),
         lambda out: out.copy_(torch.softmax(x, dim=1)), 1),
        ("row sum 4096x1024", row_reduce(T.reduce_sum), (x, torch.empty(rows)), lambda out: torch.sum(x, dim=1, out=out), 1),
        ("row max 4096x1024", row_reduce(T.reduce_max), (x, torch.empty(rows)), lambda out: torch.amax(x, dim=1, out=out), 1),
        ("column sum 64x(1024x64)", column_sum, (x.view(64 * 1024, 64), torch.empty(64, 64)),
         lambda out: torch.sum(x.view(64, 1024, 64), dim=1, out=out), 1),
        ("vector add 2^22", vector_add, (u, v, torch.empty(n)), lambda out: torch.add(u, v, out=out), 2),
        ("add through 32x32 tiles 2048^2", tile_add, (w, w2, torch.empty(2048, 2048)),
         lambda out: torch.add(w, w2, out=out), 2),
    ]


def _pairs():
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group="tilelang.backends")}
    return [(b, t) for b, t in PAIRS if b in names]


def _once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="timing rounds (default 9)")
    parser.add_argument("--threads", type=int, default=None, help="TVM_NUM_THREADS for the tvm_ffi pairs")
    parser.add_argument("--check", action="store_true", help=f"exit 1 when tvm_ffi/c is over {TARGET_TVMFFI_C}x cython/c")
    args = parser.parse_args()
    if args.threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(args.threads)  # before TVM's thread pool starts
    import torch

    import tilelang

    pairs = _pairs()
    entries = []
    for label, func, inputs, reference, out_pos in _kernels():
        out = inputs[out_pos]
        expected = torch.empty_like(out)
        reference(expected)
        compiled = {}
        for backend, target in pairs:
            kernel = tilelang.compile(func, target=target, execution_backend=backend)
            out.zero_()
            kernel(*inputs)
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-3)
            compiled[f"{backend}/{target}"] = (lambda k=kernel, xs=inputs: k(*xs))
        compiled["torch"] = lambda r=reference, o=torch.empty_like(out): r(o)
        entries.append((label, compiled))
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for label, compiled in entries:
            for name, fn in compiled.items():
                times.setdefault((label, name), []).append(_once(fn))
    print(f"CPU backends ({os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', 'unset')}), median of {args.repeat} rounds")
    missed = False
    for label, compiled in entries:
        base = statistics.median(times[(label, "cython/c")]) if (label, "cython/c") in times else None
        ref = statistics.median(times[(label, "torch")])
        print(f"  {label}")
        for name in compiled:
            t = statistics.median(times[(label, name)])
            vs_cython = f"{t / base:5.2f}x cython/c" if base else ""
            print(f"    {name:<14} {t * 1e3:9.3f} ms  {vs_cython}  {t / ref:6.2f}x torch")
            if name == "tvm_ffi/c" and base and t / base > TARGET_TVMFFI_C:
                missed = True
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
