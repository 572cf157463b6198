"""The profiler and the autotuner name no bundled backend (not in code, strings or comments):
everything they need of a backend comes from its declaration and the hooks it implements."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = [
    *sorted((ROOT / "tilelang_core" / "profiler").glob("*.py")),
    *sorted((ROOT / "tilelang_core" / "autotuner").glob("*.py")),
    ROOT / "tilelang_core" / "devices.py",
    ROOT / "tilelang" / "profiler.py",
    ROOT / "tilelang" / "autotuner.py",
]
#: Names backends have had here or upstream (besides the bundled plugins' entry points).
KNOWN = {"cython", "tvm_ffi", "tvmffi", "nvrtc", "ctypes", "cutedsl", "torch_cpp", "dlpack_backend"}


def bundled_backend_names() -> set[str]:
    """Entry-point names of every plugin distribution under plugins/."""
    names = set()
    for project in ROOT.glob("plugins/*/pyproject.toml"):
        text = project.read_text()
        section = re.search(r'\[project\.entry-points\."tilelang\.backends"\]\n(.*?)(?:\n\[|\Z)', text, re.S)
        if section:
            names.update(m.group(1) for m in re.finditer(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", section.group(1), re.M))
    return names


def offenders(text: str, names: set[str]) -> list[str]:
    pattern = re.compile(r"(?<![A-Za-z0-9_])(%s)(?![A-Za-z0-9_])" % "|".join(sorted(map(re.escape, names))), re.I)
    return [f"{lineno}: {line.strip()}" for lineno, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def test_the_scan_sees_the_bundled_backends_and_would_catch_one():
    names = bundled_backend_names()
    assert {"cython", "tvm_ffi"} <= names
    assert offenders('if kernel.backend.name == "cython":\n    pass', names | KNOWN) == ['1: if kernel.backend.name == "cython":']
    assert offenders("# the TVM_FFI launcher is faster", names | KNOWN)
    assert offenders("uses tvm.runtime and torch.cuda", names | KNOWN) == []
    assert all(p.is_file() for p in SCANNED) and len(SCANNED) >= 10


def shared_vocabulary() -> set[str]:
    """Target kinds and device families, which a backend may share as its name (``metal``): as words they
    name the device here; test_core_names_no_backend.py catches their use as a backend name."""
    from tilelang_core.capabilities import KNOWN_TARGET_KINDS
    from tilelang_core.devices import TORCH_DEVICE_TYPES

    return set(KNOWN_TARGET_KINDS) | set(TORCH_DEVICE_TYPES) | set(TORCH_DEVICE_TYPES.values())


def test_profiler_and_autotuner_name_no_backend():
    names = (bundled_backend_names() | KNOWN) - shared_vocabulary()
    found = []
    for path in SCANNED:
        found += [f"{path.relative_to(ROOT)}:{hit}" for hit in offenders(path.read_text(), names)]
    assert found == [], "the profiler/autotuner names a concrete backend:\n" + "\n".join(found)
