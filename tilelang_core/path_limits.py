"""How long a file name and a path may be on the file system that would hold a path."""

from __future__ import annotations

import os
from typing import Union

#: The limits assumed where the system does not say (Linux's: ``NAME_MAX``, ``PATH_MAX``).
DEFAULT_NAME_MAX = 255
DEFAULT_PATH_MAX = 4096


def path_limits(path: Union[str, os.PathLike]) -> tuple[int, int]:
    """``(NAME_MAX, PATH_MAX)`` in bytes of the file system of ``path``'s nearest existing folder
    (``path`` itself need not exist); :data:`DEFAULT_NAME_MAX` / :data:`DEFAULT_PATH_MAX` for what
    the system does not answer (Windows has no ``pathconf``)."""
    probe = os.path.abspath(path)
    while not os.path.isdir(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    limits = []
    for name, default in (("PC_NAME_MAX", DEFAULT_NAME_MAX), ("PC_PATH_MAX", DEFAULT_PATH_MAX)):
        try:
            limits.append(os.pathconf(probe, name))
        except (OSError, ValueError, AttributeError):
            limits.append(default)
    return limits[0], limits[1]


__all__ = ["DEFAULT_NAME_MAX", "DEFAULT_PATH_MAX", "path_limits"]
