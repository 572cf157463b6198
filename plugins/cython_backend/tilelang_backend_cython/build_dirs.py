"""The cython backend's build folders in the temporary folder, and the leftovers of killed builds.

A build folder is ``tilelang-cython-<pid>-<name>-<random>`` and holds the marker file
:data:`BUILDING` while the build runs. A successful build's folder is removed whole once the
library is loaded; a failed build, or one kept on request (``TILELANG_CYTHON_KEEP_BUILD=1``,
``verbose=True``), drops the marker with :func:`keep` and stays for the user. A process killed
while it built (SIGKILL, or SIGTERM, for which Python runs no cleanup either) left its folder
(source, library, compiler output) in the temporary folder for good; :func:`make` removes, once
per process, the marked folders of processes that no longer run, by the rules the kernel cache
applies to its own leftovers (:mod:`tilelang_core.cache.leftovers`: nothing written in the last
minutes, a process that still runs is trusted for a day). Folders of other names, and kept ones,
are never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from tilelang_core.fork_locks import renew_after_fork

__all__ = ["BUILDING", "PREFIX", "keep", "make", "reap_leftovers"]

PREFIX = "tilelang-cython-"
#: The marker file of a build in progress (removed when its folder is kept).
BUILDING = ".tilelang-building"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")
_reaped = False
_reap_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_reap_lock")  # a fork child gets a fresh one


def make(name: str) -> Path:
    """A fresh private build folder for ``name`` (a safe file name), marked as building.

    :raises OSError: none can be made (the caller says what to do)."""
    reap_leftovers()
    directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{name}-"))
    (directory / BUILDING).touch()
    return directory


def keep(directory: Path) -> None:
    """Keep ``directory`` for the user (a failed or kept build): it is no longer a leftover."""
    with contextlib.suppress(OSError):
        (directory / BUILDING).unlink()


def reap_leftovers(force: bool = False) -> list[Path]:
    """Remove the marked build folders of processes that no longer run (once per process unless
    ``force``); returns those removed."""
    global _reaped
    from tilelang_core.cache.leftovers import BUSY_AGE_S, STALE_AGE_S, process_alive

    with _reap_lock:
        if _reaped and not force:
            return []
        _reaped = True
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        found = _NAME.match(entry.name)
        if found is None or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            age = now - os.lstat(os.path.join(entry.path, BUILDING)).st_mtime
        except OSError:  # no marker: kept, or not ours
            continue
        if age < BUSY_AGE_S or (age < STALE_AGE_S and process_alive(int(found.group(1)))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
