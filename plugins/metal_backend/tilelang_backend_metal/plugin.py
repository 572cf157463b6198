"""Entry point of the ``metal`` execution backend (group ``tilelang.backends``).

Imports nothing heavy: torch is touched only inside the hooks (:mod:`.runtime` for the probe,
:mod:`.kernel` for the work).
"""

from __future__ import annotations

from typing import Any

from tilelang_core.hookspecs import hookimpl

from . import BACKEND_NAME, __version__

#: Plugin API version this backend was written for.
TILELANG_PLUGIN_API = 1

#: ``auto`` priority for ``metal``: above tvm_ffi's (10), which needs a TVM built with Metal; this
#: backend needs only torch's MPS device (see README.md).
METAL_PRIORITY = 50

#: Tensor and scalar dtypes Metal kernels can take (Metal has no 64-bit floats).
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32"]


def backend_spec_dict() -> dict[str, Any]:
    """The declaration as a plain dict (validated into a ``BackendSpec`` by the core)."""
    return {
        "name": BACKEND_NAME,
        "distribution": "tilelang-backend-metal",
        "version": __version__,
        "plugin_api_version": TILELANG_PLUGIN_API,
        "description": "Metal kernels compiled at run time by torch.mps.compile_shader, launched on torch's MPS stream",
        "targets": {
            "metal": {
                "priority": METAL_PRIORITY,
                "consumes": ["device_source"],
                "device_language": "metal",
                "dynamic_strides": True,
                "dtypes": DTYPES,
                "platforms": ["darwin"],
                "build_platforms": "all",
                "compiles_at_load": True,
                "loads_without_tvm": True,
                "requires": {"python_modules": ["torch"]},
            },
        },
        # upstream TileLang calls its Metal backend "torch"
        "supersedes": ["torch"],
    }


@hookimpl
def tilelang_backend_spec() -> dict[str, Any]:
    """Declare the ``metal`` backend (cheap: no torch, no device query)."""
    return backend_spec_dict()


@hookimpl
def tilelang_backend_probe(target_kind: str) -> Any:
    """Build only everywhere, run where torch's MPS device is usable ("macOS only", "torch has no MPS")."""
    from tilelang_core.capabilities import Availability

    from .runtime import mps_problem

    problem = mps_problem()
    return Availability.yes() if problem is None else Availability.build_only_because(problem)


@hookimpl
def tilelang_backend_build(artifact: Any, options: Any) -> Any:
    """Check the artifact's Metal source and make the launch plan; compile it where MPS is usable."""
    from .kernel import build

    return build(artifact, options)


@hookimpl
def tilelang_backend_save(kernel: Any, directory: Any) -> None:
    """Write the kernel's Metal source and launch plan (JSON) into ``directory``."""
    from .kernel import save

    save(kernel, directory)


@hookimpl
def tilelang_backend_load(artifact: Any, directory: Any, options: Any) -> Any:
    """Restore a saved kernel without TVM; compiles its source where MPS is usable."""
    from .kernel import load

    return load(artifact, directory, options)
