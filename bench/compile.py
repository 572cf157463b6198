"""Compile time of CUDA kernels: the nvrtc backend's in-process NVRTC build against ``nvcc -cubin``.

For each example kernel (``examples/*.py``; ``--tileops`` adds the tile-operator kernels of the
test suite), the CUDA source is lowered once for ``--arch`` and then compiled, in this run, by:

- ``nvcc -cubin -arch=<arch>`` (a fresh process per compile, as a build system runs it);
- the nvrtc backend's compiler (NVRTC with the backend's stand-in libcu++ headers, in its worker
  process as under the default time limit; with ``TILELANG_COMPILE_TIMEOUT_SECONDS=0``, in this
  process), the same source, the same architecture;
- for reference, NVRTC with the real libcu++ headers (what the generated source costs without
  the stand-ins).

Each figure is the median of ``--repeat`` compiles (NVRTC is warmed by one compile first; the
first-ever NVRTC compile of the process, which loads the library, is printed on its own). The
goal: every NVRTC build at most 0.5x nvcc's time. Exit status 1 when a kernel misses it.

    python bench/compile.py [--arch sm_90] [--repeat 3] [--tileops]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.5


def _kernels(tileops: bool):
    sys.path.insert(0, str(ROOT / "plugins" / "nvrtc_backend" / "tests"))
    import nvrtc_kernels

    return nvrtc_kernels.all_kernels() if tileops else nvrtc_kernels.examples()


def _nvcc() -> str:
    found = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc")
    if not found:
        sys.exit("nvcc is not on PATH: it is the reference of this benchmark")
    return found


def _time_nvcc(nvcc: str, source: Path, arch: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-o", str(source.with_suffix(".cubin")), str(source)],
                       check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _time_nvrtc(source: str, arch, repeat: int, real: bool) -> float:
    from tilelang_backend_nvrtc.compiler import _compile, nvrtc_options

    options = nvrtc_options(arch, real_headers=real)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        _compile(source.encode(), "bench", options)  # what compile_cubin runs (worker or not), without its memo
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tileops", action="store_true", help="also the tile-operator kernels of the test suite")
    parser.add_argument("--no-real", action="store_true", help="skip NVRTC with the real libcu++ headers")
    args = parser.parse_args()

    from tilelang_core.lowering import lower

    from tilelang_backend_nvrtc.arch import Arch
    from tilelang_backend_nvrtc.compiler import compile_cubin
    from tilelang_backend_nvrtc.toolchain import toolchain

    arch = Arch.parse(args.arch)
    nvcc = _nvcc()
    kernels = [(name, lower(func, target=f"cuda -arch={arch.name}").device_source) for name, func, _ in _kernels(args.tileops)]
    start = time.perf_counter()
    compile_cubin("warmup", kernels[0][1], arch)  # loads NVRTC and its builtins
    cold = time.perf_counter() - start
    tc = toolchain()
    nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    print(f"arch {arch.name}; NVRTC {tc.version_text}; {nvcc_version}; median of {args.repeat}; "
          f"first NVRTC compile of the process (library load included): {cold * 1e3:.0f} ms")
    print(f"{'kernel':<34} {'nvcc':>9} {'nvrtc':>9} {'ratio':>7} {'real hdrs':>10}")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="tilelang-bench-compile-") as tmp:
        for i, (name, source) in enumerate(kernels):
            path = Path(tmp) / f"k{i}.cu"
            path.write_text(source)
            t_nvcc = _time_nvcc(nvcc, path, arch.name, args.repeat)
            t_ours = _time_nvrtc(source, arch, args.repeat, real=False)
            real = "" if args.no_real else f"{_time_nvrtc(source, arch, 1, real=True) * 1e3:8.0f}ms"
            ratio = t_ours / t_nvcc
            worst = max(worst, ratio)
            print(f"{name:<34} {t_nvcc * 1e3:7.0f}ms {t_ours * 1e3:7.0f}ms {ratio:6.2f}x {real:>10}")
    verdict = "meets" if worst <= GOAL else "MISSES"
    print(f"worst ratio nvrtc/nvcc: {worst:.2f}x ({verdict} the goal of {GOAL}x)")
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
