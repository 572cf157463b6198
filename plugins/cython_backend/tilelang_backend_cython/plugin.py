"""Entry point of the ``cython`` execution backend (group ``tilelang.backends``).

Imports nothing heavy: torch, TVM, the compilers and the native dispatcher are touched only
inside the hooks. See :mod:`tilelang_backend_cython.backend` for the work itself.
"""

from __future__ import annotations

from typing import Any

from tilelang_core.hookspecs import hookimpl

#: Plugin API version this backend was written for.
TILELANG_PLUGIN_API = 1


def _cc_executable() -> str:
    from tilelang_core.env_commands import program_from_env

    return program_from_env("CC", "cc")


@hookimpl
def tilelang_backend_spec() -> dict[str, Any]:
    """Declare the backend: CPU (``c``) kernels and CUDA kernels, both from device source."""
    return {
        "name": "cython",
        "plugin_api_version": TILELANG_PLUGIN_API,
        "description": "Compiles device source with cc/nvcc; native DLPack dispatcher with the lowest call overhead",
        "supersedes": ["ctypes"],
        "targets": {
            "c": {
                "priority": 100,
                "consumes": ["device_source"],
                "device_language": "c",
                "dynamic_strides": True,
                "platforms": ["linux", "darwin"],
                "requires": {"executables": [_cc_executable()], "python_modules": ["torch"]},
                "native_compiler": {"program": "cc", "env": "CC", "version_args": ["--version"]},
                "loads_without_tvm": True,
            },
            "cuda": {
                "priority": 50,
                "consumes": ["device_source"],
                "device_language": "cuda",
                "dynamic_strides": True,
                "cuda_streams": True,
                "platforms": ["linux"],
                "requires": {"executables": ["nvcc"], "python_modules": ["torch"]},
                "native_compiler": {"program": "nvcc", "env": "TILELANG_NVCC", "version_args": ["--version"]},
                "loads_without_tvm": True,
            },
        },
    }


def _torch_has_exchange_api() -> bool:
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("torch").split(".")[:2])
    except Exception:
        return True  # unknown: let the build report it
    return (major, minor) >= (2, 10)


def not_built_reason() -> str:
    """Why the dispatch extension is missing: usually a source folder of this package (a checkout of
    its repository, when Python runs from its folder) shadows the installed one, where reinstalling
    cannot help; else an installation without it."""
    from importlib.metadata import distributions
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for dist in distributions(name="tilelang-backend-cython"):  # each copy on sys.path (a checkout has one too)
        installed = Path(dist.locate_file("tilelang_backend_cython")).resolve()
        if installed != here and (installed / "__init__.py").exists():
            return (f"the dispatch extension is not built in {here}, the copy of tilelang_backend_cython Python "
                    f"imported: it shadows the installed one in {installed} (a source folder on sys.path, such as "
                    f"the current directory); run Python from another folder")
    return "the dispatch extension is not built; reinstall tilelang-backend-cython"


@hookimpl
def tilelang_backend_probe(target_kind: str) -> Any:
    """``c``: the dispatch extension is built and torch has the DLPack C exchange API;
    ``cuda``: additionally a CUDA driver and a device to run, while nvcc (declared) is enough to
    build: without a driver or device the answer is *build only* (kernels build and export)."""
    from importlib.util import find_spec

    from tilelang_core.capabilities import Availability

    if find_spec("tilelang_backend_cython._dispatch") is None:
        return Availability.no(not_built_reason())
    if not _torch_has_exchange_api():
        return Availability.no("torch is too old: the cython backend needs torch.Tensor.__dlpack_c_exchange_api__ (torch>=2.10)")
    if target_kind == "cuda":
        from .backend import cuda_run_problem

        problem = cuda_run_problem()
        if problem is not None:
            return Availability.build_only_because(problem)
    return Availability.yes()


@hookimpl
def tilelang_backend_build(artifact: Any, options: Any) -> Any:
    """Compile the artifact's device source and return the callable kernel."""
    from .backend import build

    return build(artifact, options)


@hookimpl
def tilelang_backend_save(kernel: Any, directory: Any) -> None:
    """Write the kernel's shared library and its call plan (JSON) into ``directory``."""
    from .backend import save

    save(kernel, directory)


@hookimpl
def tilelang_backend_load(artifact: Any, directory: Any, options: Any) -> Any:
    """Restore a saved kernel without TVM and without a compiler."""
    from .backend import load

    return load(artifact, directory, options)
