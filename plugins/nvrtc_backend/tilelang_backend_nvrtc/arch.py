"""GPU architectures: parsing ``sm_XX`` names, choosing one for a build, matching a device.

A cubin holds machine code for one architecture. It runs on a device of the same major version
and an equal or higher minor version (an ``sm_80`` cubin runs on ``sm_86``), except
architecture-specific builds (``sm_90a``), which run only on exactly that architecture, and
family builds (``sm_100f``), which run on the same major version only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

_ARCH = re.compile(r"sm_(\d+)([af]?)")


@dataclass(frozen=True)
class Arch:
    """One CUDA GPU architecture, e.g. ``sm_90`` (major 9, minor 0) or ``sm_90a``."""

    number: int
    """The SM number: 90 for sm_90."""
    suffix: str = ""
    """'' (portable within the major version), 'a' (this architecture only), 'f' (this family)."""

    @classmethod
    def parse(cls, text: str) -> "Arch":
        """``"sm_90"``, ``"sm_90a"``, ``"90"`` or ``"9.0"``; :raises ValueError: anything else."""
        text = str(text).strip()
        if re.fullmatch(r"\d+\.\d", text):
            major, minor = text.split(".")
            return cls(int(major) * 10 + int(minor))
        if text.isdigit():
            return cls(int(text))
        m = _ARCH.fullmatch(text)
        if not m:
            raise ValueError(f"{text!r} is not a CUDA architecture (expected e.g. 'sm_90', 'sm_90a' or '9.0')")
        return cls(int(m.group(1)), m.group(2))

    @property
    def name(self) -> str:
        return f"sm_{self.number}{self.suffix}"

    @property
    def major(self) -> int:
        return self.number // 10

    @property
    def minor(self) -> int:
        return self.number % 10

    def runs_on(self, device: "Arch") -> bool:
        """Whether a cubin built for this architecture runs on a device of architecture ``device``."""
        if self.suffix == "a":
            return device.number == self.number
        return device.major == self.major and device.minor >= self.minor

    def __str__(self) -> str:
        return self.name


#: What a ``-arch`` may say, for messages.
ARCH_FORMS = ("sm_XX (e.g. sm_90), sm_XXa for architecture-specific code (e.g. sm_90a) or sm_XXf for a "
              "family (e.g. sm_100f)")


def device_arch(device: Any = None) -> Optional[Arch]:
    """The architecture of a torch CUDA device (default: the current one), None without a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability(device)
    except Exception:  # noqa: BLE001 - torch without CUDA, no device
        return None
    return Arch(int(major) * 10 + int(minor))


def artifact_arch_name(artifact: Any) -> Optional[str]:
    """The architecture an artifact was lowered for, as written: its ``arch`` field when the core
    sets one, else the ``-arch=`` of its target string (``"cuda -arch=sm_90"``); None when neither
    says one."""
    value = getattr(artifact, "arch", None)
    if value:
        return str(value)
    m = re.search(r"-arch=(\S+)", getattr(artifact, "target", "") or "")
    return m.group(1) if m else None


def artifact_arch(artifact: Any) -> Optional[Arch]:
    """:func:`artifact_arch_name` parsed; None when the artifact says none.

    :raises ValueError: the one it says is not a CUDA architecture (``sm_90x``).
    """
    name = artifact_arch_name(artifact)
    return Arch.parse(name) if name is not None else None
