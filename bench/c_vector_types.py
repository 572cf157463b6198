"""CPU C source: our ``#pragma omp simd`` loops against the ``*(float4*)`` form of upstream's C generator.

Upstream TileLang's C code generator turns an elementwise ``T.Parallel`` loop into 128-bit vector
expressions (``*(float4*)(Add + (i * 4)) = (*(float4*)(A + (i * 4)) + *(float4*)(B + (i * 4)));``)
and one upstream test checks that text. Ours prints the scalar loop under ``#pragma omp simd`` and
lets the C compiler pick the vector width (``-march=native``: 256 bits on AVX2, 512 on AVX-512).
This script measures what the vector-typed form would cost, so that the choice rests on a figure.

Both sources are the same four-loop kernel (``Add = A + B``, ``Sub = A - B``, ``Mul = A * B``,
``Div = A / B`` over ``n`` float32):

* **ours**: ``tilelang.lower(kernel, target="c").kernel_source``, the source every CPU backend
  compiles;
* **float4**: the same entry function written in the vector-typed form, with ``float4`` a GCC/Clang
  vector type (``vector_size(16)``, element alignment, ``may_alias``), which is the fastest way C
  can run that text.

Each source gets a small driver loop (``reps`` calls of the kernel) and is compiled with the same
compiler and flags the cython backend uses for ``c`` kernels; ctypes calls the driver, so Python is
not timed. Rounds alternate between the two; the figure is the median round. Printed per size:
microseconds per kernel call and the ratio float4/ours (above 1: the vector-typed form is slower).
The outputs of both are checked against torch first.

    python bench/c_vector_types.py [--sizes 1024,4096,65536,4194304] [--rounds 7]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

OPS = (("Add", "+"), ("Sub", "-"), ("Mul", "*"), ("Div", "/"))
ENTRY = "vec_arith_kernel"


def _kernel(n: int):
    import tilelang.language as T

    @T.prim_func
    def vec_arith(
        A: T.Tensor((n,), "float32"),
        B: T.Tensor((n,), "float32"),
        Add: T.Tensor((n,), "float32"),
        Sub: T.Tensor((n,), "float32"),
        Mul: T.Tensor((n,), "float32"),
        Div: T.Tensor((n,), "float32"),
    ):
        for i in T.Parallel(n):
            Add[i] = A[i] + B[i]
        for i in T.Parallel(n):
            Sub[i] = A[i] - B[i]
        for i in T.Parallel(n):
            Mul[i] = A[i] * B[i]
        for i in T.Parallel(n):
            Div[i] = A[i] / B[i]

    return vec_arith


def float4_source(n: int) -> str:
    """The kernel as a C generator that prints 128-bit vector expressions writes it."""
    lines = [
        "#include <stdint.h>",
        "typedef float float4 __attribute__((vector_size(16), aligned(4), may_alias));",
        f"int32_t {ENTRY}(float* A, float* B, float* Add, float* Sub, float* Mul, float* Div) {{",
    ]
    for name, op in OPS:
        lines += [
            f"  for (int32_t i = 0; i < {n // 4}; ++i) {{",
            f"    *(float4*)({name} + (i * 4)) = (*(float4*)(A + (i * 4)) {op} *(float4*)(B + (i * 4)));",
            "  }",
        ]
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


DRIVER = f"""
int64_t tl_bench_reps(float* A, float* B, float* Add, float* Sub, float* Mul, float* Div, int64_t reps) {{
  int64_t status = 0;
  for (int64_t r = 0; r < reps; ++r) {{
    status += {ENTRY}(A, B, Add, Sub, Mul, Div);
    __asm__ __volatile__("" ::: "memory");  /* every call runs: nothing is hoisted out of the loop */
  }}
  return status;
}}
"""


def compiler_command() -> list[str]:
    """The compiler and flags the cython backend builds ``c`` kernels with."""
    from tilelang_backend_cython import compiler

    cc = compiler.c_compiler()
    return [*cc, *compiler.C_FLAGS, *(compiler.SIMD_FLAGS if compiler.simd_flags_work(cc) else [])]


def _compile(source: str, name: str, directory: Path, command: list[str]) -> ctypes.CDLL:
    src = directory / f"{name}.c"
    lib = directory / f"{name}.so"
    src.write_text(source + DRIVER)
    subprocess.run([*command, "-o", str(lib), str(src)], check=True)
    dll = ctypes.CDLL(str(lib))
    dll.tl_bench_reps.restype = ctypes.c_int64
    dll.tl_bench_reps.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64]
    return dll


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,4096,65536,4194304", help="comma-separated n (multiples of 4)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--round-ms", type=float, default=40.0, help="time per variant and round")
    args = ap.parse_args()
    import torch

    import tilelang

    torch.manual_seed(0)
    command = compiler_command()
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    print(f"compiler: {shlex.join(command)}")
    with tempfile.TemporaryDirectory(prefix="tilelang-bench-vec-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            if n % 4:
                raise SystemExit(f"--sizes: {n} is not a multiple of 4 (the float4 form needs whole vectors)")
            print(f"n = {n} ({6 * 4 * n // 1024} KiB in six arrays)")
            ours_src = tilelang.lower(_kernel(n), target="c").kernel_source
            dlls = {"ours": _compile(ours_src, f"ours_{n}", Path(tmp), command),
                    "float4": _compile(float4_source(n), f"float4_{n}", Path(tmp), command)}
            a = torch.randn(n)
            b = torch.rand(n) + 1.0
            outs = {v: [torch.empty(n) for _ in OPS] for v in dlls}
            ptrs = {v: [a.data_ptr(), b.data_ptr(), *(t.data_ptr() for t in outs[v])] for v in dlls}
            for variant, dll in dlls.items():
                dll.tl_bench_reps(*ptrs[variant], 1)
                for out, ref in zip(outs[variant], (a + b, a - b, a * b, a / b)):
                    torch.testing.assert_close(out, ref, msg=lambda m: f"{variant}, n={n}: {m}")
            start = time.perf_counter()
            dlls["ours"].tl_bench_reps(*ptrs["ours"], 10)
            per_call = (time.perf_counter() - start) / 10
            reps = max(1, int(args.round_ms * 1e-3 / max(per_call, 1e-9)))
            rounds = {v: [] for v in dlls}
            for _ in range(args.rounds):
                for variant, dll in dlls.items():
                    start = time.perf_counter()
                    dll.tl_bench_reps(*ptrs[variant], reps)
                    rounds[variant].append((time.perf_counter() - start) / reps)
            us = {v: 1e6 * statistics.median(t) for v, t in rounds.items()}
            print(f"  ours {us['ours']:.3f} us/call, float4 {us['float4']:.3f} us/call, "
                  f"float4/ours {us['float4'] / us['ours']:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
