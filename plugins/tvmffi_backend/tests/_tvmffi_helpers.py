"""Shared helpers of the tvm_ffi backend tests (imported by basename: pytest prepends this dir).

Kernels are TVMScript prim_funcs compiled with ``tvm.compile`` and wrapped in a KernelArtifact
(``tilelang_backend_tvmffi.testing``), then built through the plugin's own build hook, exactly as
the core calls it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

import pytest

PLUGIN_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def artifact(kernel_name: str, target: str = "llvm"):
    """The (cached) artifact of one kernel of ``_tvmffi_kernels.py`` for ``target``."""
    from tilelang_backend_tvmffi.testing import artifact_from_prim_func

    import _tvmffi_kernels

    return artifact_from_prim_func(getattr(_tvmffi_kernels, kernel_name), target=target, name=kernel_name)


def build(kernel_name: str, out_idx=(), target: str = "llvm"):
    """Build a kernel of ``_tvmffi_kernels.py`` through the plugin's build hook."""
    from tilelang_core.artifact import BuildOptions

    from tilelang_backend_tvmffi import plugin

    art = artifact(kernel_name, target)
    n = len(art.params)
    return plugin.tilelang_backend_build(
        artifact=art, options=BuildOptions(out_idx=[i + n if i < 0 else i for i in out_idx])
    )


def run_python(code: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (same venv); returns the completed process.
    ``env``: variables set (a value None: removed) on top of this process's environment."""
    environment = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, env=environment,
    )


def cuda_device_available() -> bool:
    import torch

    return torch.cuda.is_available()


requires_gpu = pytest.mark.skipif(
    "not __import__('torch').cuda.is_available()",
    reason="no CUDA device: torch.cuda.is_available() is False (launch tests need a GPU)",
)
