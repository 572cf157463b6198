"""The core never names a concrete backend: everything goes through declarations and hooks."""

from __future__ import annotations

import re
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "tilelang_core"
BACKEND_NAMES = {"cython", "tvm_ffi", "tvmffi", "nvrtc", "ctypes", "torch_cpp", "dlpack_backend"}


def _installed_names() -> set[str]:
    from tilelang_core.backends import get_registry

    return set(get_registry().names())


def test_no_backend_name_in_core_code():
    names = BACKEND_NAMES | _installed_names()
    pattern = re.compile(r"""(['"])(%s)\1""" % "|".join(sorted(map(re.escape, names))))
    offenders = []
    for path in CORE.rglob("*.py"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if "not backend names" in line:  # a Python module that shares a backend's name
                continue
            if pattern.search(line) or re.search(r"tilelang_backend_(%s)\b" % "|".join(names), line):
                offenders.append(f"{path.relative_to(CORE.parent)}:{lineno}: {line.strip()}")
    assert offenders == [], "the core names a concrete backend:\n" + "\n".join(offenders)
