"""Commands named by environment variables (``CC``, ``CXX``, ``TILELANG_NVCC``): a program, then flags.

Backends and the kernel cache key read them the same way, shell-split. A value that cannot be
split (an unbalanced quote) is the user's setting, not a backend's fault:
:func:`command_from_env` raises a :class:`~tilelang_core.errors.SettingError` naming the
variable, and :func:`program_from_env`, for capability declarations, never raises.
"""

from __future__ import annotations

import os
import shlex

from .errors import SettingError


def command_from_env(variable: str, default: str) -> list[str]:
    """``$variable`` shell-split (program, then flags), or ``[default]`` when it is unset or blank.

    :raises SettingError: the value is not a command line (an unbalanced quote, say).
    """
    raw = os.environ.get(variable, "")
    if not raw.strip():
        return [default]
    try:
        return shlex.split(raw)
    except ValueError as exc:
        raise SettingError(
            f"${variable}={raw!r} is not a command line ({exc}); set it to a program and its flags, such as "
            f"'{default}' or '{default} -O2', or unset it"
        ) from None


def program_from_env(variable: str, default: str) -> str:
    """The program of ``$variable`` (its first word), or ``default``; the whole value when it is
    not a command line (then building says why, :func:`command_from_env`)."""
    try:
        return command_from_env(variable, default)[0]
    except SettingError:
        return os.environ.get(variable, "").strip()


__all__ = ["command_from_env", "program_from_env"]
