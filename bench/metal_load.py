"""What loading a ``metal`` kernel costs: ``tilelang.load`` against a bare ``torch.mps.compile_shader``.

The metal backend keeps no binary (its target declares ``compiles_at_load``): loading an exported
kernel checks the entry and the launch plan, then compiles the Metal source once with
``torch.mps.compile_shader``. This script exports the examples' kernels, then, in fresh processes
that have imported torch already (that import is not counted), measures:

- ``tilelang.load(path)`` (on a Mac with MPS this includes the compile);
- on a Mac, the reference: ``torch.mps.compile_shader(source)`` of the same source alone;
- everywhere, a second reference: ``tilelang.load`` of the same kernel exported by the ``cython``
  backend for target ``c`` (a native library, nothing compiled at load), when it is installed;

and prints the medians of ``--repeat`` processes and the ratios (load / bare compile: what the
checks add on top of the compile; load / cython load: what metal's checks cost against a binary's).
Elsewhere the metal load compiles nothing (no MPS), so only the second ratio is printed. No targets
are asserted; numbers on a busy machine are noisy.

    python bench/metal_load.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_LOAD = """
import sys, time, torch, tilelang
t = time.perf_counter()
k = tilelang.load(sys.argv[1])
print(time.perf_counter() - t)
"""

_COMPILE = """
import sys, time, torch
source = open(sys.argv[1]).read()
t = time.perf_counter()
lib = torch.mps.compile_shader(source)
print(time.perf_counter() - t)
"""


def _median_seconds(code: str, arg: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("TILELANG_DISABLE_CACHE", "1")
    sys.path.insert(0, str(ROOT / "plugins" / "metal_backend" / "tests"))
    import metal_kernels
    import torch

    import tilelang

    on_mac = sys.platform == "darwin" and torch.backends.mps.is_available()
    print(f"machine: {sys.platform}, MPS {'available' if on_mac else 'not available'}; medians of {args.repeat} "
          "fresh processes, torch imported before timing")
    from tilelang_core.backends import get_registry

    cython = get_registry().get("cython") is not None
    print(f"{'kernel':<34} {'tilelang.load':>14} {'compile_shader':>15} {'ratio':>7} {'cython load':>12} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, func, out_idx, _ in metal_kernels.examples():
            kernel = tilelang.compile(func, out_idx=out_idx, execution_backend="metal", target="metal")
            path = kernel.export(Path(tmp) / f"k{abs(hash(name))}")
            load = _median_seconds(_LOAD, str(path), args.repeat)
            mac = f"{'(needs a Mac)':>15} {'-':>7}"
            if on_mac:
                bare = _median_seconds(_COMPILE, str(path / "backend" / "kernel.metal"), args.repeat)
                mac = f"{bare * 1e3:>13.1f}ms {load / bare:>6.2f}x"
            ref = f"{'-':>12} {'-':>7}"
            if cython:
                native = tilelang.compile(func, out_idx=out_idx, execution_backend="cython", target="c")
                cpath = native.export(Path(tmp) / f"c{abs(hash(name))}")
                cload = _median_seconds(_LOAD, str(cpath), args.repeat)
                ref = f"{cload * 1e3:>10.1f}ms {load / cload:>6.2f}x"
            print(f"{name:<34} {load * 1e3:>12.1f}ms {mac} {ref}")
    if not on_mac:
        print("the load above compiles nothing (no MPS here); on a Mac it adds one torch.mps.compile_shader per kernel")
    print(json.dumps({"on_mac": on_mac}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
