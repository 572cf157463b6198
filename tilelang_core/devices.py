"""Device families and the torch devices their kernels run on: the core's one mapping.

Kernel artifacts name the device of each tensor parameter by its DLPack *device family*
(``TensorParam.device``: ``"cpu"``, ``"cuda"``, ``"metal"``, ``"rocm"``, ...; see
:data:`tilelang_core.lowering.target.DEVICE_OF_KIND`). Whatever needs a torch tensor or a torch
device for a kernel (the profiler making inputs, the autotuner, the metal backend, a GPU kit)
goes through :func:`torch_device_type` here, so the mapping exists once::

    cpu -> cpu      cuda -> cuda      metal -> mps      rocm -> cuda (torch's HIP builds use "cuda")

Importing this module imports neither torch nor TVM; the functions that need torch import it.
"""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any, Optional

from .errors import TileLangError

#: torch device type of each device family a kernel may run on.
TORCH_DEVICE_TYPES: dict[str, str] = {"cpu": "cpu", "cuda": "cuda", "metal": "mps", "rocm": "cuda"}


class DeviceError(TileLangError, ValueError):
    """A device family torch cannot address, or one that is not present on this machine."""


def torch_device_type(family: str) -> str:
    """The torch device type (``"cpu"``, ``"cuda"``, ``"mps"``) of a device family.

    :raises DeviceError: torch has no device for ``family`` (e.g. ``"vulkan"``).
    """
    try:
        return TORCH_DEVICE_TYPES[family]
    except KeyError:
        raise DeviceError(
            f"device family {family!r} has no torch device; known families: "
            f"{', '.join(f'{k} ({v})' for k, v in TORCH_DEVICE_TYPES.items())}"
        ) from None


def family_of_torch_device(device: Any) -> str:
    """The device family of a torch device or device type string (``"mps"`` -> ``"metal"``).

    ``"cuda"`` maps to ``"cuda"`` (also on ROCm builds of torch, whose kernels the core treats as
    the ``rocm`` family only when an artifact says so).
    """
    kind = getattr(device, "type", None) or str(device).split(":")[0]
    for family, torch_type in TORCH_DEVICE_TYPES.items():
        if torch_type == kind:
            return family
    raise DeviceError(f"torch device {device!r} belongs to no device family the core knows")


def torch_device(family: str, index: Optional[int] = None) -> Any:
    """A ``torch.device`` for ``family``; GPU families default to the current device.

    :raises DeviceError: the family's device is not available in this process.
    """
    import torch

    kind = torch_device_type(family)
    if kind == "cpu":
        return torch.device("cpu")
    if not is_available(family):
        raise DeviceError(
            f"device family {family!r} needs a torch {kind!r} device, which is not available here "
            f"(torch {torch.__version__})"
        )
    if kind == "cuda":
        return torch.device("cuda", torch.cuda.current_device() if index is None else index)
    return torch.device(kind) if index is None else torch.device(kind, index)


def is_available(family: str) -> bool:
    """Whether torch can run on ``family``'s device in this process."""
    kind = TORCH_DEVICE_TYPES.get(family)
    if kind == "cpu":
        return True
    if kind is None:
        return False
    import torch

    if kind == "cuda":
        return bool(torch.cuda.is_available())
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def synchronize(family: str) -> None:
    """Wait for the work queued on ``family``'s current device; nothing for ``cpu``.

    Never touches CUDA for a CPU kernel (``torch.cuda.synchronize()`` fails without a GPU).
    """
    kind = torch_device_type(family)
    if kind == "cpu":
        return
    import torch

    if kind == "cuda":
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``sysctl`` on macOS, else ``platform``)."""
    return _cpu_model()


@lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "cpu model", "uarch"):
                    return value.strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        import subprocess

        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5, check=False
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


@lru_cache(maxsize=1)
def instruction_set_id() -> str:
    """A short hash of this CPU's instruction set (architecture and feature flags).

    Native code built with ``-march=native`` runs only where this is the same: backends record
    it when they save such a kernel and refuse to load the kernel on a CPU where it differs.
    """
    import hashlib

    text = platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features", "isa")):
                    text += " " + " ".join(sorted(line.split(":", 1)[1].split()))
                    break
    except OSError:
        text += " " + platform.processor()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def device_identity(family: str) -> dict[str, Any]:
    """What identifies the device a kernel of ``family`` runs on here, as plain JSON values.

    ``cpu``: the CPU model, the machine architecture and the usable cores. ``cuda``/``rocm``:
    the current GPU's name and compute capability (and ``gcnArchName`` on ROCm). ``metal``: the
    machine's chip (Apple GPUs are named by the SoC). Timings measured on one identity are not
    reused on another (the autotuner keys its results on this).
    """
    kind = torch_device_type(family)
    ident: dict[str, Any] = {"family": family, "torch_device": kind}
    if kind == "cpu":
        ident.update(cpu=cpu_model(), machine=platform.machine(), cores=usable_cores())
        return ident
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise DeviceError(f"device family {family!r}: no GPU is visible to torch in this process")
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        ident.update(name=props.name, capability=f"{props.major}.{props.minor}")
        arch = getattr(props, "gcnArchName", None)
        if arch:
            ident["arch"] = str(arch)
        return ident
    ident.update(name=cpu_model(), machine=platform.machine())
    return ident


__all__ = [
    "TORCH_DEVICE_TYPES",
    "DeviceError",
    "cpu_model",
    "device_identity",
    "family_of_torch_device",
    "instruction_set_id",
    "is_available",
    "synchronize",
    "torch_device",
    "torch_device_type",
    "usable_cores",
]
