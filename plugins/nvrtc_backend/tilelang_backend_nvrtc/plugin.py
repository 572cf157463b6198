"""Entry point of the ``nvrtc`` execution backend (group ``tilelang.backends``).

Imports nothing heavy: NVRTC, the CUDA driver bindings and torch are touched only inside the
hooks (see :mod:`.kernel` for the work itself, :mod:`.driver` for the probe of the driver).
"""

from __future__ import annotations

from typing import Any

from tilelang_core.hookspecs import hookimpl

from . import BACKEND_NAME, __version__

#: Plugin API version this backend was written for.
TILELANG_PLUGIN_API = 1

#: ``auto`` priority for ``cuda``: below the backends with a native dispatcher (cython 50,
#: tvm_ffi 100), so ``auto`` picks nvrtc where it is the one that can run (no nvcc, no TVM CUDA
#: runtime); see README.md.
CUDA_PRIORITY = 40


def backend_spec_dict() -> dict[str, Any]:
    """The declaration as a plain dict (validated into a ``BackendSpec`` by the core)."""
    return {
        "name": BACKEND_NAME,
        "distribution": "tilelang-backend-nvrtc",
        "version": __version__,
        "plugin_api_version": TILELANG_PLUGIN_API,
        "description": "CUDA kernels compiled by NVRTC (no nvcc), launched with the CUDA driver API",
        "targets": {
            "cuda": {
                "priority": CUDA_PRIORITY,
                "consumes": ["device_source"],
                "device_language": "cuda",
                "dynamic_strides": True,
                "cuda_streams": True,
                "platforms": ["linux"],
                "requires": {"python_modules": ["cuda.bindings"]},
                "library_toolchain": {
                    "name": "NVRTC",
                    "distributions": ["nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-cccl", "cuda-bindings"],
                    "env": ["CUDA_HOME", "CUDA_PATH"],
                    "files": ["$CUDA_HOME/version.json", "$CUDA_PATH/version.json"],
                },
            },
        },
    }


@hookimpl
def tilelang_backend_spec() -> dict[str, Any]:
    """Declare the ``nvrtc`` backend (cheap: no NVRTC, no driver, no device query)."""
    return backend_spec_dict()


@hookimpl
def tilelang_backend_probe(target_kind: str) -> Any:
    """NVRTC and the CUDA headers must load to build; a CUDA driver and a device to run."""
    from tilelang_core.capabilities import Availability

    from .driver import driver_problem
    from .toolchain import ToolchainMissing, toolchain

    try:
        toolchain()
    except ToolchainMissing as exc:
        return Availability.no(str(exc))
    problem = driver_problem()
    if problem is not None:
        return Availability.build_only_because(problem)
    return Availability.yes()


@hookimpl
def tilelang_backend_build(artifact: Any, options: Any) -> Any:
    """Compile the artifact's CUDA source with NVRTC into a cubin; return the callable kernel."""
    from .kernel import build

    return build(artifact, options)


@hookimpl
def tilelang_backend_save(kernel: Any, directory: Any) -> None:
    """Write the kernel's cubin and launch plan (JSON) into ``directory``."""
    from .kernel import save

    save(kernel, directory)


@hookimpl
def tilelang_backend_load(artifact: Any, directory: Any, options: Any) -> Any:
    """Restore a saved kernel with neither NVRTC nor TVM (only the driver, at call time)."""
    from .kernel import load

    return load(artifact, directory, options)
