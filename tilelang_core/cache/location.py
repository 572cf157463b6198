"""Where the kernel cache lives, and whether that place is safe to load native code from."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Optional

from ..errors import CacheError

#: Environment variable naming the cache directory.
CACHE_DIR_ENV = "TILELANG_CACHE_DIR"
#: Environment variable that disables the cache (memory and disk) when set to 1/true/yes/on.
DISABLE_ENV = "TILELANG_DISABLE_CACHE"

_TRUE = {"1", "true", "yes", "on"}


def cache_disabled() -> bool:
    """Whether ``TILELANG_DISABLE_CACHE`` turns the kernel cache off."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() in _TRUE


def default_cache_dir() -> Path:
    """``$TILELANG_CACHE_DIR``, else the platform's user cache directory plus ``tilelang``.

    Linux and other Unix: ``$XDG_CACHE_HOME/tilelang`` (``~/.cache/tilelang``); macOS:
    ``~/Library/Caches/tilelang``; Windows: ``%LOCALAPPDATA%\\tilelang\\Cache``.
    """
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "tilelang"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / "tilelang" / "Cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".cache"
    return base / "tilelang"


def _owner_ok(st: os.stat_result) -> bool:
    if not hasattr(os, "getuid"):
        return True
    return st.st_uid in (os.getuid(), 0)


def check_private(directory: Path) -> None:
    """Refuse a cache directory that another user could write to.

    Loading a kernel means loading native code; anyone who can write into the directory (or
    replace it, through a writable parent without the sticky bit) could make this process run
    code of theirs. Raises :class:`~tilelang_core.errors.CacheError` saying which path, why, and
    how to fix it.
    """
    if sys.platform == "win32":  # POSIX permission bits do not apply
        return
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"kernel cache location {directory} is not a directory; set {CACHE_DIR_ENV} to a directory")
    mode = stat.S_IMODE(st.st_mode)
    if not _owner_ok(st):
        raise CacheError(
            f"kernel cache directory {directory} belongs to another user (uid {st.st_uid}); loading native code "
            f"from it would run whatever that user put there. Set {CACHE_DIR_ENV} to a directory of your own"
        )
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"kernel cache directory {directory} is writable by other users (mode {mode:#o}); loading native code "
            f"from it would run whatever they put there. Run `chmod 700 {directory}` or set {CACHE_DIR_ENV} to a "
            f"private directory"
        )
    # A parent others can write to (without the sticky bit) lets them swap the directory itself.
    for parent in directory.resolve().parents:
        try:
            pst = os.stat(parent)
        except OSError:
            continue
        pmode = stat.S_IMODE(pst.st_mode)
        if pmode & (stat.S_IWGRP | stat.S_IWOTH) and not pmode & stat.S_ISVTX:
            raise CacheError(
                f"kernel cache directory {directory} is inside {parent}, which other users can write to "
                f"(mode {pmode:#o}, no sticky bit), so they could replace the cache; set {CACHE_DIR_ENV} to a "
                f"directory under a private parent"
            )


def prepare_cache_dir(directory: Path) -> Path:
    """Create ``directory`` (mode 0700) if needed and check that it is private; returns it.

    Raises :class:`CacheError` for a directory others can write to, and :class:`OSError` when it
    cannot be created or written (the caller then works without a disk cache).
    """
    directory = Path(directory)
    if not directory.exists():
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            os.chmod(directory, 0o700)
        except OSError:
            pass
    check_private(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(f"kernel cache directory {directory} is not writable")
    return directory


def describe(directory: Optional[Path] = None) -> str:
    """The cache location as a user-facing string."""
    return str(directory or default_cache_dir())
