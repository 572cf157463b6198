"""The same kernels compiled and run by TileLang-Core and by upstream TileLang, in the same run.

Usage::

    python bench/vs_upstream.py --upstream-python /path/to/venv-with-tilelang-0.1.15/bin/python
    python bench/vs_upstream.py --upstream-python ... --quick     # fewer rounds

Each side runs in its own interpreter (both packages are called ``tilelang``): this script's
Python for TileLang-Core, ``--upstream-python`` for upstream. Both run the same kernel source
(upstream's syntax, which TileLang-Core accepts unchanged) on the CPU, target ``c`` with the
``cython`` execution backend (upstream's CPU path), with a fresh, empty kernel cache each.

What is timed, on each side:

* **compile**: ``tilelang.compile`` of each kernel, seconds, the first one of the process included
  (one-time start-up is part of what a user waits for);
* **call**: the per-call cost of a 3-tensor kernel on 1024 float32 elements, and ``torch.add(a, b,
  out=c)`` in the same process (best of ``--repeat`` rounds of ``--number`` calls, via ``timeit``);
* **run**: the time of larger kernels (an elementwise add of 2**20 floats, a 256x256x256 float32
  matmul, a row sum) against the torch operation computing the same result, in the same process.

It prints both sides' figures, each side's ratio to its own torch reference, and TileLang-Core's
figure over upstream's (below 1: TileLang-Core is faster). Results are checked against torch on
both sides first; a kernel that does not compile or gives a wrong result is reported, not timed.
It is a measurement, not a test: the exit status is 0 unless a side cannot be started at all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import timeit

# the kernels, in upstream's syntax, live in vs_upstream_kernels.py beside this file (both sides
# import that one file: TVMScript parses a kernel from its source file)
KERNELS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vs_upstream_kernels.py")

CASES = [
    # name, what its time shows ("call": the per-call cost; "run": the kernel's work), factory call
    # in vs_upstream_kernels.py, torch reference, input shapes, output shape
    ("add 1024", "call", "add(1024)", "torch.add(a, b, out=c)", [(1024,), (1024,)], (1024,)),
    ("add 2**20", "run", "add(1 << 20)", "torch.add(a, b, out=c)", [(1 << 20,), (1 << 20,)], (1 << 20,)),
    ("matmul 256^3", "run", "matmul(256, 256, 256)", "torch.matmul(a, b, out=c)", [(256, 256), (256, 256)],
     (256, 256)),
    ("rowsum 1024x1024", "run", "rowsum(1024, 1024)", "torch.sum(a, dim=1, out=c)", [(1024, 1024)], (1024,)),
]
RUN_CALLS = 20  # calls per round of a "run" case (each takes 0.1 to 100 ms)


def worker(number: int, repeat: int) -> dict:
    """Run every case in this interpreter and return the figures (called under each Python)."""
    import logging

    import torch
    import tilelang

    logging.disable(logging.INFO)  # upstream logs every compile at INFO
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    import importlib.util

    spec = importlib.util.spec_from_file_location("vs_upstream_kernels", KERNELS_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    space = vars(module)
    out: dict = {"version": getattr(tilelang, "__version__", "?"), "python": sys.version.split()[0], "cases": {}}
    for name, kind, call, reference, in_shapes, out_shape in CASES:
        row: dict = {}
        out["cases"][name] = row
        try:
            func = eval(call, space)
            start = time.perf_counter()
            kernel = tilelang.compile(func, target="c", execution_backend="cython")
            row["compile_s"] = time.perf_counter() - start
        except Exception as e:  # a side that cannot build a kernel says why
            row["error"] = f"compile: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            continue
        args = [torch.rand(s) for s in in_shapes]
        c = torch.empty(out_shape)
        env = {"torch": torch, "kernel": kernel, "c": c, "a": args[0], "b": args[-1]}
        kernel(*args, c)
        want = torch.empty(out_shape)
        eval(reference, {**env, "c": want})
        if not torch.allclose(c, want, rtol=1e-4, atol=1e-3):
            row["error"] = f"wrong result: max abs difference {float((c - want).abs().max()):.3g}"
            continue
        call_kernel = "kernel(" + ", ".join("a" if i == 0 else "b" for i in range(len(args))) + ", c)"
        timer_k = timeit.Timer(call_kernel, globals=env)
        timer_t = timeit.Timer(reference, globals=env)
        n = number if kind == "call" else min(number, RUN_CALLS)
        best_k = best_t = float("inf")
        for _ in range(repeat):  # interleaved rounds: both see the same machine state
            best_k = min(best_k, timer_k.timeit(n) / n)
            best_t = min(best_t, timer_t.timeit(n) / n)
        row.update(kernel_s=best_k, torch_s=best_t)
    return out


def run_side(python: str, number: int, repeat: int) -> dict:
    """Run :func:`worker` under ``python`` with a fresh kernel cache; its JSON result."""
    with tempfile.TemporaryDirectory(prefix="tl-vs-upstream-") as cache:
        env = dict(os.environ, TILELANG_CACHE_DIR=cache, TILELANG_TMP_DIR=cache)
        here = os.path.dirname(os.path.abspath(__file__))
        proc = subprocess.run(
            [python, os.path.abspath(__file__), "--worker", "--number", str(number), "--repeat", str(repeat)],
            cwd=tempfile.gettempdir() if python != sys.executable else os.path.dirname(here),
            env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise SystemExit(f"{python}: the worker failed (exit {proc.returncode}):\n{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fmt_time(seconds: float) -> str:
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def report(ours: dict, upstream: dict) -> None:
    """Print the comparison table."""
    print(f"TileLang-Core {ours['version']} (Python {ours['python']}) against upstream TileLang "
          f"{upstream['version']} (Python {upstream['python']}); target c, cython backend, CPU")
    head = f"{'kernel':<18} {'figure':<9} {'TileLang-Core':>15} {'upstream':>15} {'ours/upstream':>14}"
    print(head)
    print("-" * len(head))
    for name, kind, *_ in CASES:
        o, u = ours["cases"].get(name, {}), upstream["cases"].get(name, {})
        if "error" in o or "error" in u:
            print(f"{name:<18} {'-':<9} {o.get('error', 'ok')[:40]:>15} {u.get('error', 'ok')[:40]:>15}")
            continue
        print(f"{name:<18} {'compile':<9} {_fmt_time(o['compile_s']):>15} {_fmt_time(u['compile_s']):>15} "
              f"{o['compile_s'] / u['compile_s']:>13.2f}x")
        ro, ru = o["kernel_s"] / o["torch_s"], u["kernel_s"] / u["torch_s"]
        print(f"{'':<18} {kind:<9} {_fmt_time(o['kernel_s']):>15} {_fmt_time(u['kernel_s']):>15} "
              f"{o['kernel_s'] / u['kernel_s']:>13.2f}x")
        print(f"{'':<18} {'/ torch':<9} {ro:>14.2f}x {ru:>14.2f}x {ro / ru:>13.2f}x")
    print("compile: the first row includes each process's one-time start-up; call/run: best round;"
          " '/ torch': over the same torch operation in the same process.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream-python", help="a Python with upstream tilelang installed (pip install tilelang==0.1.15)")
    parser.add_argument("--number", type=int, default=20000, help="calls per round for the 1024-element call (default 20000)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.number, args.repeat = 2000, 3
    if args.worker:
        print(json.dumps(worker(args.number, args.repeat)))
        return 0
    if not args.upstream_python:
        parser.error("--upstream-python is required: the Python of a virtual environment with upstream "
                     "tilelang installed (for example: python -m venv up && up/bin/pip install "
                     "tilelang==0.1.15 torch==2.13.0)")
    if not os.access(args.upstream_python, os.X_OK):
        parser.error(f"--upstream-python {args.upstream_python!r} is not an executable file")
    ours = run_side(sys.executable, args.number, args.repeat)
    upstream = run_side(args.upstream_python, args.number, args.repeat)
    report(ours, upstream)
    return 0


if __name__ == "__main__":
    sys.exit(main())
