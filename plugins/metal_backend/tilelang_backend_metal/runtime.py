"""Where Metal kernels run: torch's MPS device, and what is missing when it is not there.

A :class:`ShaderRuntime` is the one thing a kernel needs from the device: the torch device type of
its tensors, why it cannot run here (or None), and a shader compiler whose libraries expose each
kernel as an attribute called like ``torch.mps.compile_shader``'s kernels::

    library = runtime.compile_shader(source)
    library.main_kernel(*tensors, scalars, threads=[...], group_size=[...])

:class:`TorchMPS` is the real one. Tests plug a CPU stand-in into a built kernel with
``kernel.with_runtime(standin)`` (see the plugin's tests); nothing else in the backend knows.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Protocol

#: Why kernels cannot run on a platform other than macOS (the probe's reason there).
NOT_MACOS = "macOS only: Metal kernels run on Apple GPUs through torch's MPS device (this is {platform})"
#: Why kernels cannot run on a Mac whose torch has no usable MPS device.
NO_MPS = "torch has no MPS: {detail}"


def mps_problem() -> Optional[str]:
    """Why Metal kernels cannot run in this process, or None when torch's MPS device is usable.

    Imports torch (only on macOS): the probe and the first call use it, never the plugin's import.
    """
    if sys.platform != "darwin":
        return NOT_MACOS.format(platform=sys.platform)
    import torch

    mps = getattr(torch.backends, "mps", None)
    if mps is None or not hasattr(torch, "mps") or not hasattr(torch.mps, "compile_shader"):
        return NO_MPS.format(detail=f"torch {torch.__version__} has no torch.mps.compile_shader; install torch>=2.6")
    if not mps.is_built():
        return NO_MPS.format(detail=f"torch {torch.__version__} was built without MPS support")
    if not mps.is_available():
        return NO_MPS.format(detail="torch.backends.mps.is_available() is false (macOS 12.3+ on an Apple GPU is needed)")
    return None


class ShaderRuntime(Protocol):
    """What a Metal kernel needs from where it runs."""

    #: torch device type the kernel's tensors are on, and its outputs are allocated on.
    device_type: str

    def problem(self) -> Optional[str]:
        """Why kernels cannot run here, or None."""

    def compile_shader(self, source: str) -> Any:
        """A library of the kernels in ``source`` (Metal Shading Language); raises on a compile error."""


class TorchMPS:
    """The real runtime: ``torch.mps.compile_shader`` libraries, tensors on ``mps``.

    Kernels launched through them go on torch's current MPS stream, in call order with torch's
    own work on the device.
    """

    device_type = "mps"

    def problem(self) -> Optional[str]:
        """Why torch's MPS device cannot run kernels here (see :func:`mps_problem`), or None."""
        return mps_problem()

    def compile_shader(self, source: str) -> Any:
        """``torch.mps.compile_shader(source)``."""
        import torch

        return torch.mps.compile_shader(source)

    def __repr__(self) -> str:
        return "TorchMPS()"


TORCH_MPS = TorchMPS()
