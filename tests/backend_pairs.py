"""The CPU (backend, target) pairs tests run a kernel on, as pytest parameters (an importable module).

Each pair is skipped, with the reason, when its backend is not installed and usable here (the
retired ``ctypes`` backend is installed only by ``scripts/setup.sh --with-retired``).
"""

from __future__ import annotations

import pytest

from tilelang_core.backends import get_registry

#: Every CPU pair of the bundled backends, the retired ctypes one included.
CPU_PAIRS = (("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm"), ("ctypes", "c"))


def installed(backend: str) -> bool:
    """Whether ``backend`` is installed and usable in this environment."""
    record = get_registry().get(backend)
    return record is not None and record.usable


def cpu_pairs() -> list:
    """:data:`CPU_PAIRS` as ``pytest.param(backend, target)``, id ``backend-target``."""
    return [pytest.param(b, t, marks=pytest.mark.skipif(not installed(b), reason=f"{b} is not installed"),
                         id=f"{b}-{t}") for b, t in CPU_PAIRS]
