"""Where NVRTC and the CUDA headers are, and which NVRTC this is.

NVRTC itself is loaded by ``cuda.bindings.nvrtc``, which finds ``libnvrtc`` through
``cuda.pathfinder`` (the ``nvidia-cuda-nvrtc`` wheel first, then ``CUDA_HOME``/``CUDA_PATH``). The
headers are found the same way: ``cuda_fp16.h`` and friends from the ``nvidia-cuda-runtime`` wheel
or ``$CUDA_HOME/include``, libcu++ (CCCL) from the ``nvidia-cuda-cccl`` wheel or the toolkit.

Nothing here runs at import; every lookup happens once per process, on first need.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

#: The backend's own small headers (stand-ins for two libcu++ headers, see standin-include/cuda/std).
STANDIN_INCLUDE = Path(__file__).with_name("standin-include")

#: Distributions whose versions identify the toolchain (cache key, saved launch plans).
TOOLCHAIN_DISTRIBUTIONS = ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-cccl", "cuda-bindings")


class ToolchainMissing(RuntimeError):
    """NVRTC or the CUDA headers cannot be found (the message says what to install)."""


@dataclass(frozen=True)
class Toolchain:
    """The NVRTC library and header directories one process compiles with."""

    version: tuple[int, int]
    """NVRTC's (major, minor)."""
    supported_archs: tuple[int, ...]
    """SM numbers NVRTC can compile for (75, 80, ..., 120)."""
    cuda_include: Path
    """Directory holding cuda_fp16.h, cuda_bf16.h, ..."""
    cccl_include: Optional[Path]
    """Directory holding cuda/std/... (libcu++), None when not installed."""

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def bindings_installed() -> bool:
    """Whether ``cuda.bindings`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):
        return False


def _header_dir(name: str) -> Optional[Path]:
    from cuda import pathfinder

    try:
        found = pathfinder.locate_nvidia_header_directory(name)
    except Exception:  # noqa: BLE001 - pathfinder raises for unknown or unsupported names
        return None
    return Path(found.abs_path) if found is not None else None


@functools.lru_cache(maxsize=1)
def toolchain() -> Toolchain:
    """The NVRTC of this process (cached).

    :raises ToolchainMissing: ``cuda-bindings``, NVRTC or the CUDA headers are missing.
    """
    if not bindings_installed():
        raise ToolchainMissing("cuda-bindings is not installed; pip install tilelang-backend-nvrtc (it depends on it)")
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        err2, archs = nvrtc.nvrtcGetSupportedArchs()
    except Exception as exc:  # noqa: BLE001 - DynamicLibNotFoundError and friends
        raise ToolchainMissing(
            f"NVRTC cannot be loaded ({type(exc).__name__}: {exc}); pip install nvidia-cuda-nvrtc, "
            "or set CUDA_HOME to a CUDA toolkit"
        ) from None
    if int(err) != 0 or int(err2) != 0:
        raise ToolchainMissing(f"NVRTC does not answer (nvrtcVersion: {err}, nvrtcGetSupportedArchs: {err2})")
    cuda_include = _header_dir("cudart")
    if cuda_include is None or not (cuda_include / "cuda_fp16.h").is_file():
        raise ToolchainMissing(
            "the CUDA headers (cuda_fp16.h, ...) cannot be found; pip install nvidia-cuda-runtime, "
            "or set CUDA_HOME to a CUDA toolkit"
        )
    cccl = _header_dir("cccl")
    if cccl is None and (cuda_include / "cuda" / "std").is_dir():
        cccl = cuda_include
    return Toolchain(
        version=(int(major), int(minor)),
        supported_archs=tuple(int(a) for a in archs),
        cuda_include=cuda_include,
        cccl_include=cccl,
    )


def distribution_versions() -> dict[str, str]:
    """Installed versions of :data:`TOOLCHAIN_DISTRIBUTIONS` (metadata only, no import)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for dist in TOOLCHAIN_DISTRIBUTIONS:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return found
