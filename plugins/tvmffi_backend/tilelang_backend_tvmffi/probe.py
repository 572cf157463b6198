"""Availability probe of the ``tvm_ffi`` backend: asks the installed TVM, never guesses.

- ``llvm``: TVM's LLVM codegen must be enabled.
- ``c``: TVM's C host codegen must be registered and the C compiler (``$CC`` or ``cc``,
  :func:`.runtime.c_compiler`) must exist (the C source module is compiled and linked by
  ``export_library`` with it).
- ``cuda`` / ``rocm`` / ``metal``: TVM's runtime for that device must be enabled (for CUDA the
  sidecar ``libtvm_runtime_cuda`` loads only when the CUDA driver ``libcuda.so.1`` is present) and
  a device must be visible. Without TVM's CUDA runtime, CUDA is *build only*: kernels are
  compiled and can be exported, not run.
"""

from __future__ import annotations

from typing import Optional

from tilelang_core.capabilities import Availability

#: TVM codegen global function per target kind.
_CODEGEN = {
    "llvm": "target.build.llvm",
    "c": "target.build.c",
    "cuda": "target.build.cuda",
    "rocm": "target.build.rocm",
    "metal": "target.build.metal",
}

#: Human names of the device runtimes.
_RUNTIME_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "metal": "Metal"}


def _runtime_enabled(tvm, kind: str) -> bool:
    try:
        return bool(tvm.runtime.enabled(kind))
    except Exception:  # noqa: BLE001 - TVM raises for kinds it does not know
        return False


def _cuda_runtime_failure() -> str:
    """Why TVM's CUDA runtime sidecar did not load (best effort, for the probe's reason)."""
    import ctypes

    from .runtime import tvm_lib_dir

    lib_dir = tvm_lib_dir()
    if lib_dir is None:
        return "TVM built without CUDA runtime"
    path = lib_dir / "libtvm_runtime_cuda.so"
    if not path.exists():
        return f"TVM built without CUDA runtime (no {path.name} in {lib_dir})"
    try:
        ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        return (
            f"no CUDA device: TVM's CUDA runtime ({path.name}) cannot be loaded ({exc}); "
            "install the NVIDIA driver on a machine with a GPU"
        )
    return "TVM's CUDA runtime is not enabled in this process"


def probe(target_kind: str) -> Optional[Availability]:
    """Return whether the backend can run kernels for ``target_kind`` on this machine, and why not."""
    try:
        import tvm
    except Exception as exc:  # noqa: BLE001 - report any import failure as the reason
        return Availability.no(f"cannot import tvm: {exc}")

    codegen = _CODEGEN.get(target_kind)
    if codegen is None:
        return Availability.no(f"target kind {target_kind!r} is not supported by tvm_ffi")

    if target_kind == "llvm":
        if not _runtime_enabled(tvm, "llvm"):
            return Availability.no("TVM built without LLVM (tvm.runtime.enabled('llvm') is False)")
        return Availability.yes()

    if target_kind == "c":
        if tvm.get_global_func(codegen, allow_missing=True) is None:
            return Availability.no("TVM built without the C host codegen (target.build.c)")
        import shutil

        from .runtime import c_compiler

        compiler = c_compiler()
        if not compiler or shutil.which(compiler[0]) is None:
            return Availability.no(
                f"no C compiler {compiler[0] if compiler else ''!r} found (set CC or install gcc/clang); "
                "target-c kernels are compiled and linked by export_library with it"
            )
        return Availability.yes()

    # Device targets: codegen, runtime, then a device.
    human = _RUNTIME_NAMES[target_kind]
    if tvm.get_global_func(codegen, allow_missing=True) is None:
        return Availability.no(f"TVM built without {human} codegen ({codegen})")
    if not _runtime_enabled(tvm, target_kind):
        if target_kind == "cuda":
            # TVM's codegen compiles the device code (nvrtc or nvcc) and export_library writes it
            # out without the CUDA runtime: kernels build and export here, they cannot run.
            return Availability.build_only_because(_cuda_runtime_failure())
        return Availability.no(f"TVM built without {human} runtime")
    try:
        exists = bool(tvm.runtime.device(target_kind, 0).exist)
    except Exception:  # noqa: BLE001
        exists = False
    if not exists:
        return Availability.no(f"no {human} device")
    if target_kind in ("cuda", "rocm"):
        import torch

        if not torch.cuda.is_available():
            return Availability.no(f"torch sees no {human} device (torch.cuda.is_available() is False)")
    if target_kind == "metal":
        import torch

        if not torch.backends.mps.is_available():
            return Availability.no("torch sees no Metal device (torch.backends.mps.is_available() is False)")
    return Availability.yes()
