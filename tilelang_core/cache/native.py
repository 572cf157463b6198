"""The path a backend should hand ``dlopen`` for a saved kernel's library (for backends' load hooks).

``dlopen`` returns the library already loaded under the same path name, without reading the
file again. A kernel exported, loaded, exported again to the same path (``overwrite=True``) and
loaded again in the same process would therefore run the *first* kernel's code with the second
kernel's call plan. :func:`dlopen_path` remembers which file (device, inode, size, modification
time) each path named when it was first handed out; when the path now names another file, it
returns a fresh alias (a symbolic link in a private temporary folder, named after the file's
identity) so ``dlopen`` maps the new file.

:func:`load_advice` tells a backend what to say when a library does not load: a folder on a file
system mounted ``noexec`` (a hardened ``/tmp``) made every backend's load fail with "failed to map
segment from shared object", and their advice (recompile the kernel; a function defined nowhere)
sent the user the wrong way.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

from ..fork_locks import renew_after_fork

_seen: dict[str, tuple[int, int, int, int]] = {}
_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_lock")
_alias_dir: Optional[Path] = None


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def dlopen_path(library: os.PathLike) -> str:
    """A path naming ``library`` that no other file was loaded under in this process.

    :raises OSError: ``library`` cannot be ``stat``-ed, or the alias cannot be made.
    """
    global _alias_dir
    path = os.path.abspath(os.fspath(library))
    sig = _signature(os.stat(path))
    with _lock:
        if _seen.setdefault(path, sig) == sig:
            return path
        if _alias_dir is None:
            _alias_dir = Path(tempfile.mkdtemp(prefix="tilelang-libs-"))
            atexit.register(shutil.rmtree, str(_alias_dir), True)
        alias = str(_alias_dir / ("%x-%x-%x-%x" % sig) / os.path.basename(path))
        if not os.path.lexists(alias):
            os.makedirs(os.path.dirname(alias), mode=0o700, exist_ok=True)
            os.symlink(path, alias)
        _seen.setdefault(alias, sig)
        return alias


def noexec_folder(path: os.PathLike) -> Optional[str]:
    """``path``'s folder (``path`` itself if a folder) when it is on a file system mounted
    ``noexec``, from which ``dlopen`` cannot map a library ("failed to map segment from shared
    object"); None otherwise, or where that cannot be told."""
    folder = os.path.realpath(os.fspath(path))  # an alias (dlopen_path's link) is judged by its file
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    try:
        flags = os.statvfs(folder).f_flag
    except (OSError, AttributeError):  # gone, or no statvfs (Windows)
        return None
    return folder if flags & getattr(os, "ST_NOEXEC", 0) else None


def load_advice(path: os.PathLike, otherwise: str) -> str:
    """What to do about a library at ``path`` that does not load: move it off a ``noexec`` file
    system if it is on one (recompiling cannot help there), else ``otherwise``."""
    folder = noexec_folder(path)
    if folder is None:
        return otherwise
    return (f"{folder} is on a file system mounted noexec, from which no library can be loaded: use a folder on "
            f"another file system (TMPDIR for builds, TILELANG_CACHE_DIR for the kernel cache, another path for an "
            f"export)")


def noexec_note(path: os.PathLike) -> str:
    """``"; <what to do>"`` to add to a load error when ``path`` is on a ``noexec`` file system, else ``""``."""
    return "" if noexec_folder(path) is None else "; " + load_advice(path, "")


__all__ = ["dlopen_path", "load_advice", "noexec_folder", "noexec_note"]
