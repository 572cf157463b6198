"""``tilelang.engine.callback``: TileLang's source post-processing registrations, importable here.

Upstream TileLang lets a program register a function that rewrites every generated CUDA, HIP, C or
Metal source (``register_cuda_postproc_callback`` & co.). TileLang-Core has no such global hook:
what a backend does with the source is the backend plugin's job (its build hook, docs/hooks.md),
so a registration cannot be honoured. The names exist so that code importing them (upstream's
examples do, unused) runs; calling one raises :class:`NotImplementedError` saying so.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "register_c_postproc",
    "register_c_postproc_callback",
    "register_cuda_postproc",
    "register_cuda_postproc_callback",
    "register_hip_postproc",
    "register_hip_postproc_callback",
    "register_metal_postproc",
    "register_metal_postproc_callback",
]


def _refuse(name: str) -> None:
    raise NotImplementedError(
        f"tilelang.engine.callback.{name}: post-processing generated source is not provided by TileLang-Core "
        "(there is no global source hook: a backend plugin transforms the source in its build hook, "
        "docs/hooks.md); the registration would have no effect, so it is refused"
    )


def register_cuda_postproc(func: Any, override: bool = True) -> None:
    """Refused: see the module docstring."""
    _refuse("register_cuda_postproc")


def register_hip_postproc(func: Any, override: bool = True) -> None:
    """Refused: see the module docstring."""
    _refuse("register_hip_postproc")


def register_c_postproc(func: Any, override: bool = True) -> None:
    """Refused: see the module docstring."""
    _refuse("register_c_postproc")


def register_metal_postproc(func: Any, override: bool = True) -> None:
    """Refused: see the module docstring."""
    _refuse("register_metal_postproc")


def register_cuda_postproc_callback(func: Any = None, override: bool = True) -> Any:
    """Refused (also as a decorator): see the module docstring."""
    _refuse("register_cuda_postproc_callback")


def register_hip_postproc_callback(func: Any = None, override: bool = True) -> Any:
    """Refused (also as a decorator): see the module docstring."""
    _refuse("register_hip_postproc_callback")


def register_c_postproc_callback(func: Any = None, override: bool = True) -> Any:
    """Refused (also as a decorator): see the module docstring."""
    _refuse("register_c_postproc_callback")


def register_metal_postproc_callback(func: Any = None, override: bool = True) -> Any:
    """Refused (also as a decorator): see the module docstring."""
    _refuse("register_metal_postproc_callback")
