"""CPU kernels on a busy machine: every example's cython/c time over its tvm_ffi/c time while two
CPU-bound processes run, and the parallel/serial ratio of a large matmul without them.

Usage::

    python bench/cpu_load.py            # both figures
    python bench/cpu_load.py --quick    # fewer rounds (smoke run)
    python bench/cpu_load.py --check    # exit 1 when a goal is missed

1. Quiet figure (before any load is started): a 512x512x512 blocked float32 matmul
   (``examples/matmul.py``) on cython/c with parallel blocks, over the same kernel compiled with
   ``tl.disable_parallel_blocks``. Goal: at most 0.7x (both cores help). On a machine shared with
   other work this figure is only indicative.
2. Loaded figure: the script starts two CPU-bound processes (``yes > /dev/null``, or a Python busy
   loop where ``yes`` is missing), times every example of ``examples/*.py`` on cython/c and
   tvm_ffi/c (tvm_ffi/llvm for information), then stops both processes by their PIDs. Goal: every
   cython/c time at most 3x its tvm_ffi/c time.

Timing: rounds in which every kernel is timed once (interleaved, so load spikes hit all of them);
a round times a batch of calls sized to about 50 us (one call for slower kernels); each kernel's
figure is its median round (the best round is printed too).
The machine's load average is printed before and after, and the cython block launcher's counts of
parallel runs, parallel runs that did not pay (after which it runs serially for a while) and
serial runs: on a machine busy with other work the quiet figure is ~1.0x because the launcher finds
parallel blocks do not pay there. Exits 0 unless ``--check`` and a goal is missed: it is a
measurement, not a test.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = _ROOT / "examples"
TARGET_LOADED = 3.0
TARGET_QUIET = 0.7


def load_examples() -> list[Any]:
    """The ``EXAMPLES`` records of ``examples/*.py`` (as examples/run_all.py reads them)."""
    sys.path.insert(0, str(EXAMPLES_DIR))
    found = []
    for path in sorted(EXAMPLES_DIR.glob("*.py")):
        if path.name == "run_all.py" or path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"bench_examples_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.extend(getattr(module, "EXAMPLES", []))
    return found


def start_load(n: int) -> list[subprocess.Popen]:
    """``n`` CPU-bound processes (``yes`` writing to /dev/null, else a Python busy loop)."""
    cmd = ["yes"] if shutil.which("yes") else [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    """End the processes :func:`start_load` started, by their PIDs."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _batch(fn: Callable[[], Any]) -> int:
    """Calls per timed batch: about 50 us worth (short batches are rarely preempted)."""
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return max(1, min(1000, int(50e-6 / max(best, 1e-7))))


def time_interleaved(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, tuple[float, float]]:
    """(median, best) seconds per call of each entry, timed in interleaved rounds."""
    batches = {key: _batch(fn) for key, fn in calls.items()}
    samples: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, fn in calls.items():
            n = batches[key]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            samples[key].append((time.perf_counter() - start) / n)
    return {key: (statistics.median(v), min(v)) for key, v in samples.items()}


def _pool_stats() -> dict[str, int] | None:
    """The cython backend's block launcher counters (None when it is not installed)."""
    try:
        from tilelang_backend_cython import _dispatch
    except ImportError:
        return None
    return _dispatch.pool_stats()


def _stats_since(before: dict[str, int] | None) -> str:
    """' [parallel runs n, not paying n, serial n]' since ``before``: why a ratio is what it is."""
    now = _pool_stats()
    if before is None or now is None:
        return ""
    d = {k: now[k] - before[k] for k in now}
    return f" [launcher: {d['parallel']} parallel runs, {d['unpaid']} not paying, {d['serial']} serial]"


def compile_kernel(example: Any, backend: str, target: str, **kw: Any) -> Any:
    import tilelang

    return tilelang.compile(example.build(), out_idx=example.out_idx, execution_backend=backend, target=target, **kw)


def quiet_ratio(rounds: int) -> tuple[float, float, float, float]:
    """(parallel s, serial s, ratio, best-round ratio) of the 512^3 matmul on cython/c, without added load."""
    import torch

    sys.path.insert(0, str(EXAMPLES_DIR))
    from matmul import matmul

    import tilelang

    a, b = torch.randn(512, 512), torch.randn(512, 512)
    par = tilelang.compile(matmul(512, 512, 512), out_idx=-1, target="c", execution_backend="cython")
    ser = tilelang.compile(matmul(512, 512, 512), out_idx=-1, target="c", execution_backend="cython",
                           pass_configs={"tl.disable_parallel_blocks": True})
    torch.testing.assert_close(par(a, b), ser(a, b), rtol=1e-4, atol=1e-3)
    times = time_interleaved({"par": lambda: par(a, b), "ser": lambda: ser(a, b)}, rounds)
    return times["par"][0], times["ser"][0], times["par"][0] / times["ser"][0], times["par"][1] / times["ser"][1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=101, help="timing rounds (median kept)")
    parser.add_argument("--quick", action="store_true", help="21 rounds")
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes to start (default 2)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args(argv)
    rounds = 21 if args.quick else args.rounds

    import torch

    print(f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    failed = False

    before = _pool_stats()
    par, ser, ratio, best_ratio = quiet_ratio(rounds)
    ok = ratio <= TARGET_QUIET
    failed |= not ok
    print(f"quiet: matmul 512x512x512 cython/c parallel {par * 1e3:.2f} ms / serial {ser * 1e3:.2f} ms "
          f"= {ratio:.2f}x (goal <= {TARGET_QUIET}x: {'ok' if ok else 'MISSED'}; best rounds {best_ratio:.2f}x)"
          f"{_stats_since(before)}")

    examples = load_examples()
    pairs = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]
    kernels: dict[tuple[str, str, str], Callable[[], Any]] = {}
    for ex in examples:
        inputs = ex.inputs()
        expected = ex.reference(*inputs)
        for backend, target in pairs:
            try:
                k = compile_kernel(ex, backend, target)
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"{ex.name} {backend}/{target}: not measured: {type(exc).__name__}: {exc}")
                continue
            assert torch.allclose(k(*inputs), expected, rtol=ex.rtol, atol=ex.atol), (ex.name, backend, target)
            kernels[(ex.name, backend, target)] = (lambda k=k, inputs=inputs: k(*inputs))

    procs = start_load(args.load)
    try:
        time.sleep(0.5)  # let the scheduler see them
        print(f"loaded: {args.load} CPU-bound processes (pids {', '.join(str(p.pid) for p in procs)}), "
              f"load average {os.getloadavg()[0]:.2f}")
        before = _pool_stats()
        times = time_interleaved({"|".join(key): fn for key, fn in kernels.items()}, rounds)
        loaded_stats = _stats_since(before)
    finally:
        stop_load(procs)
    print(f"cython block launcher while loaded:{loaded_stats or ' -'}")
    print(f"{'median (best) per call':<28}{'cython/c':>20}{'tvm_ffi/c':>20}{'tvm_ffi/llvm':>20}{'cython/tvm_ffi c':>18}")
    for ex in examples:
        row = [times.get("|".join((ex.name, b, t))) for b, t in pairs]
        cells = "".join(f"{v[0] * 1e6:10.1f} ({v[1] * 1e6:6.1f})us" if v is not None else f"{'-':>20}" for v in row)
        if row[0] is not None and row[1] is not None:
            r = row[0][0] / row[1][0]
            ok = r <= TARGET_LOADED
            failed |= not ok
            cells += f"{r:13.2f}x {'ok' if ok else 'MISSED'}"
        print(f"{ex.name:<28}{cells}")
    print(f"goal: cython/c <= {TARGET_LOADED}x tvm_ffi/c for every example; load average now {os.getloadavg()[0]:.2f}")
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
