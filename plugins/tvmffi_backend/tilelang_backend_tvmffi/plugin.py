"""Entry point of the ``tvm_ffi`` execution backend (group ``tilelang.backends``).

This module is imported by the core's plugin registry to read the backend's declaration, so it
imports nothing heavy: no torch, no TVM, no tvm-ffi. The hooks import the working modules
(:mod:`.kernel`, :mod:`.probe`, :mod:`.runtime`) on first use.

Targets:

- ``llvm``: the CPU backend for TVM's LLVM target (priority 100).
- ``cuda``: highest priority there (100); launches on torch's current CUDA stream, or on the
  ``stream=`` passed to the call.
- ``c``: TVM's C host codegen, compiled with the system compiler through ``export_library``
  (priority 10, below the cython backend's dedicated C path).
- ``rocm``, ``metal``: declared statically so the declaration stays cheap; the probe asks the
  installed TVM whether their runtime is enabled and reports "TVM built without ..." otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from tilelang_core.hookspecs import hookimpl

from . import BACKEND_NAME, __version__

#: Plugin API version this backend was written for (see ``tilelang_core.hookspecs``).
TILELANG_PLUGIN_API = 1

_PY_REQUIRES = {"python_modules": ["tvm", "tvm_ffi", "torch"]}


def _target(priority: int, **extra: Any) -> dict[str, Any]:
    capability: dict[str, Any] = {
        "priority": priority,
        "consumes": ["runtime_module"],
        "dynamic_shapes": True,
        "dynamic_strides": True,
        "allocates_outputs": True,
        "loads_without_tvm": True,  # loading needs tvm-ffi and TVM's runtime library, not the tvm package
        "requires": dict(_PY_REQUIRES),
    }
    capability.update(extra)
    return capability


def backend_spec_dict() -> dict[str, Any]:
    """The declaration as a plain dict (validated into a ``BackendSpec`` by the core)."""
    return {
        "name": BACKEND_NAME,
        "distribution": "tilelang-backend-tvmffi",
        "version": __version__,
        "plugin_api_version": TILELANG_PLUGIN_API,
        "description": "TVM runtime modules called through apache-tvm-ffi with torch tensors (DLPack)",
        "supersedes": ["dlpack"],  # upstream TileLang's old name for this backend
        "targets": {
            "llvm": _target(100),
            "cuda": _target(100, cuda_streams=True),
            "c": _target(10, native_compiler={"program": "cc", "env": "CC"}),  # runtime.c_compiler
            "rocm": _target(100, platforms=["linux"]),
            "metal": _target(10, platforms=["darwin"]),
        },
    }


@hookimpl
def tilelang_backend_spec() -> dict[str, Any]:
    """Declare the ``tvm_ffi`` backend (cheap: no TVM, no device queries)."""
    return backend_spec_dict()


@hookimpl
def tilelang_backend_probe(target_kind: str):
    """Ask the installed TVM whether it can run ``target_kind`` here (see :mod:`.probe`)."""
    from .probe import probe

    return probe(target_kind)


@hookimpl
def tilelang_backend_build(artifact, options):
    """Wrap the artifact's TVM runtime module into a callable kernel (see :func:`.kernel.build`)."""
    from .kernel import build

    return build(artifact, options)


@hookimpl
def tilelang_backend_save(kernel: Any, directory: Path) -> None:
    """Export the kernel's module with ``export_library`` plus a JSON call plan into ``directory``."""
    from .runtime import save

    save(kernel, Path(directory))


@hookimpl
def tilelang_backend_load(artifact, directory: Path, options) -> Optional[Any]:
    """Reload a saved kernel with ``tvm_ffi.load_module`` (no lowering, no TVM compiler passes)."""
    from .runtime import load

    return load(artifact, Path(directory), options)
