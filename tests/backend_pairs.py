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


#: The three CPU paths of the bundled backends, as ``(backend, target)``.
CYTHON_C = ("cython", "c")
TVMFFI_C = ("tvm_ffi", "c")
TVMFFI_LLVM = ("tvm_ffi", "llvm")
PATHS = (CYTHON_C, TVMFFI_C, TVMFFI_LLVM)


def path_id(value) -> str:
    """pytest id of a path (``cython-c``), ``str(value)`` of any other parameter."""
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return "-".join(value)
    return str(value)


def compile_on(func, path):
    """``func`` compiled on ``path`` (``(backend, target)``); the test is skipped, with the reason,
    when that backend is missing or cannot run here."""
    import tilelang_core
    from tilelang_core.backends.selection import select_backend

    backend, target = path
    try:
        select_backend(backend, target)
    except Exception as exc:  # noqa: BLE001 - backend missing or unavailable here
        pytest.skip(f"{backend} backend not available for {target}: {exc}")
    return tilelang_core.compile(func, target=target, execution_backend=backend)


def run_on(func, path, inputs, out, **pass_configs):
    """A copy of ``out`` after ``func(*inputs, copy)`` compiled on ``path`` (with ``pass_configs``
    when given); the test is skipped as :func:`compile_on` skips it."""
    import tilelang_core

    kernel = compile_on(func, path)
    if pass_configs:
        backend, target = path
        kernel = tilelang_core.compile(func, target=target, execution_backend=backend, pass_configs=pass_configs)
    result = out.clone()
    kernel(*inputs, result)
    return result
