"""Which float8 dtype a kernel should use on this platform (TileLang's ``tilelang.language.fp8``).

Two families of 8-bit floats exist: the OCP formats ``float8_e4m3fn``/``float8_e5m2`` (NVIDIA
GPUs, CPU targets, AMD's gfx950) and AMD's ``fnuz`` formats (one NaN, no negative zero:
``float8_e4m3fnuz``/``float8_e5m2fnuz``) that earlier Instinct GPUs compute in. Portable kernels
ask these functions instead of naming one.
"""

from __future__ import annotations

from typing import Any

from . import dtypes

_FORMATS = ("e4m3", "e5m2")


def _check_format(fp8_format: Any) -> str:
    if fp8_format not in _FORMATS:
        raise ValueError(
            f"fp8_format must be one of {', '.join(map(repr, _FORMATS))} (exponent and mantissa bits), got {fp8_format!r}"
        )
    return fp8_format


def _uses_fnuz(device: Any) -> bool:
    """Whether this torch build targets AMD GPUs whose float8 is the fnuz family."""
    import torch

    if getattr(torch.version, "hip", None) is None:
        return False  # CUDA or CPU-only torch: OCP formats
    if not torch.cuda.is_available():
        return True  # a ROCm build without a visible GPU: assume the common (pre-gfx950) GPUs
    arch = str(getattr(torch.cuda.get_device_properties(device), "gcnArchName", ""))
    return not arch.startswith("gfx950")


def determine_fp8_type(fp8_format: str = "e4m3", device: Any = None) -> dtypes.dtype:
    """The float8 dtype (``T.float8_e4m3fn`` & co.) for ``fp8_format`` (``"e4m3"`` or ``"e5m2"``).

    OCP formats everywhere except on a ROCm build of torch, where AMD GPUs before gfx950 use
    the fnuz formats; ``device`` (a torch device or index) says which GPU to ask.
    """
    name = f"float8_{_check_format(fp8_format)}"
    name += "fnuz" if _uses_fnuz(device) else ("fn" if fp8_format == "e4m3" else "")
    return dtypes.dtype(name)


def determine_torch_fp8_type(fp8_format: str = "e4m3", device: Any = None) -> Any:
    """The torch dtype of :func:`determine_fp8_type` (``torch.float8_e4m3fn`` & co.)."""
    return determine_fp8_type(fp8_format, device).as_torch()


__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]
