"""The kernels the metal tests build: every example (examples/*.py), every tile-operator kernel the
suite lowers for GPUs (tests/test_tileops_cuda.py's list) that Metal can take, and kernels with a
scalar parameter of every dtype Metal kernels take, by name."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import tilelang.language as T

ROOT = Path(__file__).resolve().parents[3]

#: Tile-operator kernels the pipeline does not lower for Metal (T.atomic_add has no Metal lowering yet).
NOT_ON_METAL = {"tileop:atomic": "T.atomic_add is not supported on metal targets yet"}

#: Every scalar dtype a Metal kernel takes, with a value to pass and its value as float32.
SCALAR_VALUES = {
    "bool": (True, 1.0),
    "int8": (-7, -7.0),
    "uint8": (250, 250.0),
    "int16": (-3000, -3000.0),
    "uint16": (60000, 60000.0),
    "int32": (-123456, -123456.0),
    "uint32": (4000000000, 4000000000.0),
    "int64": (-(1 << 40), float(-(1 << 40))),
    "uint64": ((1 << 40) + 3, float((1 << 40) + 3)),
    "float16": (1.5, 1.5),
    "bfloat16": (-2.5, -2.5),
    "float32": (0.375, 0.375),
}


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def examples() -> list:
    """(name, prim_func, out_idx, example) of every example kernel."""
    sys.path.insert(0, str(ROOT / "examples"))
    found = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.name.startswith("_") or path.name == "run_all.py":
            continue
        for ex in getattr(_module(f"metal_examples_{path.stem}", path), "EXAMPLES", []):
            found.append((f"example:{ex.name}", ex.build(), ex.out_idx, ex))
    return found


def tileops() -> list:
    """(name, prim_func, out_idx, None) of every GPU tile-operator kernel Metal takes (no outputs allocated)."""
    suite = _module("metal_tileops_cuda_suite", ROOT / "tests" / "test_tileops_cuda.py")
    return [(f"tileop:{n}", f, None, None) for n, f in suite._kernels() if f"tileop:{n}" not in NOT_ON_METAL]


def tileops_module():
    """tests/tileops_kernels.py (the kernel builders)."""
    return _module("metal_tileops_kernels", ROOT / "tests" / "tileops_kernels.py")


def scaled(dtype: str, N=None, block: int = 64):
    """``Y = X * 2 + float(s) + n`` with a scalar ``s`` of ``dtype`` and a dynamic length ``n``."""
    N = T.dynamic("n") if N is None else N

    @T.prim_func
    def scaled_kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), s: getattr(T, dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] * 2.0 + T.Cast("float32", s) + T.Cast("float32", N)

    return scaled_kernel


def every_scalar(N=None, block: int = 32):
    """One kernel taking a scalar of every dtype in :data:`SCALAR_VALUES`: ``Y[i] = X[i] + sum(scalars)``."""
    N = T.dynamic("n") if N is None else N
    names = list(SCALAR_VALUES)
    args = ", ".join(f"s_{d}: T.{d}" for d in names)
    total = " + ".join(f'T.Cast("float32", s_{d})' for d in names)
    src = f'''
import tilelang.language as T
def make(N, block):
    @T.prim_func
    def every_scalar(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), {args}):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    Y[bx * block + i] = X[bx * block + i] + ({total})
    return every_scalar
'''
    # TVMScript reads a kernel's source from its file: write the generated one to a file of its own
    from mps_standin import scratch_dir

    path = scratch_dir() / f"tilelang_metal_every_scalar_{hashlib.sha256(src.encode()).hexdigest()[:12]}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(src)
        os.replace(tmp, path)
    return _module("metal_every_scalar", path).make(N, block)


def two_kernels(block: int = 64):
    """Two device kernels in one call, the second reading what the first wrote, and a float16 scalar."""
    N = T.dynamic("n")

    @T.prim_func
    def two_kernels(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32"),
                    s: T.float16):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = A[bx * block + i] * T.Cast("float32", s)
        with T.Kernel(T.ceildiv(N, 32), threads=(32, 2)) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < N:
                    C[bx * 32 + i] = B[bx * 32 + i] + 1.0

    return two_kernels
