"""Reading the files of a saved kernel: regular files only, never through a link, bounded.

Everything the core reads or hashes in a cache entry or an exported kernel goes through
:func:`open_regular`: the file is opened with ``O_NOFOLLOW`` (a symbolic link is refused, not
followed) and ``O_NONBLOCK`` (opening a FIFO does not wait for a writer), then ``fstat`` must say
it is a regular file. Reads stop at a limit (the size the metadata records, or a fixed cap), so
a file that grows or a device cannot make a reader run forever.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Optional

from ..errors import ArtifactError
from .trust import Check, describe_kind

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


def open_regular(path: Path, *, check: Optional[Check] = None) -> tuple[int, os.stat_result]:
    """An open file descriptor on ``path`` and its ``fstat``; the caller closes it.

    :raises ArtifactError: ``path`` is a symbolic link or not a regular file.
    :raises FileNotFoundError: it does not exist.
    :raises CacheError: ``check`` refused it (see :mod:`tilelang_core.cache.trust`).
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ArtifactError(f"{path} is a symbolic link; saved kernels hold plain files only") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"{path} is {describe_kind(st)}, not a regular file; saved kernels hold plain files only")
        if check is not None:
            check(Path(path), st)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: Path, *, limit: int, check: Optional[Check] = None) -> bytes:
    """The contents of the regular file ``path``; refuses one longer than ``limit`` bytes."""
    fd, _ = open_regular(path, check=check)
    try:
        parts = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total > limit:
        raise ArtifactError(f"{path} is larger than the {limit} bytes expected")
    return b"".join(parts)


def sha256_regular(path: Path, *, size: int, check: Optional[Check] = None) -> str:
    """SHA-256 (hex) of the regular file ``path``, which must hold exactly ``size`` bytes.

    Reads at most ``size + 1`` bytes.

    :raises ArtifactError: it is shorter or longer than ``size`` (truncated or changed).
    """
    fd, st = open_regular(path, check=check)
    h = hashlib.sha256()
    total = 0
    try:
        while total <= size:
            chunk = os.read(fd, min(_CHUNK, size + 1 - total))
            if not chunk:
                break
            h.update(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total != size:
        found = f"{total} bytes" if total <= size else f"more than {size} bytes"
        raise ArtifactError(f"{path} is truncated or changed ({found}, expected {size})")
    return h.hexdigest()


__all__ = ["open_regular", "read_regular", "sha256_regular"]
