"""The CUDA kernels the nvrtc tests build: every example (examples/*.py) and every tile-operator
kernel the suite lowers for CUDA (tests/test_tileops_cuda.py's list), by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def examples() -> list[tuple[str, object, object]]:
    """(name, prim_func, out_idx) of every example kernel."""
    sys.path.insert(0, str(ROOT / "examples"))
    found = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.name.startswith("_") or path.name == "run_all.py":
            continue
        for ex in getattr(_module(f"nvrtc_examples_{path.stem}", path), "EXAMPLES", []):
            found.append((f"example:{ex.name}", ex.build(), ex.out_idx))
    return found


def tileops() -> list[tuple[str, object, object]]:
    """(name, prim_func, out_idx) of every CUDA tile-operator kernel (no outputs allocated)."""
    suite = _module("nvrtc_tileops_cuda_suite", ROOT / "tests" / "test_tileops_cuda.py")
    return [(f"tileop:{name}", func, None) for name, func in suite._kernels()]


def all_kernels() -> list[tuple[str, object, object]]:
    return examples() + tileops()
