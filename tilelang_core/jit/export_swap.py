"""Replacing an export directory without a moment where its path is empty, and recovering from a
process killed while replacing one.

``export(path, overwrite=True)`` writes the new export beside ``path`` (``.<name>.tmp-<pid>-<id>``)
and then swaps the two with one ``renameat2(RENAME_EXCHANGE)`` (Linux): ``path`` always holds a
whole export, the previous or the new one. Where the exchange is not available (another system,
a file system without it) the previous export is renamed aside (``.<name>.old-<pid>-<id>``) and the
new one renamed in: a process killed between the two renames leaves ``path`` empty, with the
previous export beside it. :func:`recover_leftovers` (called by export and load) puts such an
export back, and removes what killed processes left beside ``path``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import os
import re
import shutil
import stat
import uuid
from pathlib import Path
from typing import Callable, Optional

from ..cache.leftovers import process_alive as _alive

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: What ``renameat2`` sets when this kernel or file system cannot exchange: fall back to renames.
_UNSUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


@functools.lru_cache(maxsize=None)
def _libc_renameat2() -> Optional[Callable]:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def exchange(a: Path, b: Path) -> bool:
    """Swap the directories ``a`` and ``b`` atomically; False when this system cannot."""
    function = _libc_renameat2()
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(b))


def _side_stem(target: Path) -> str:
    """``target``'s name in its side names: the name, or for a long one its start and a digest of
    the whole (a side name must fit the file system's limit; two long names with a common start
    shared their side names, and a load of one put back the other's previous export)."""
    name = target.name
    if len(os.fsencode(name)) <= 64:
        return name
    start = name[:48]
    while len(os.fsencode(start)) > 48:  # 48 bytes, not characters, of a name in a wide script
        start = start[:-1]
    return f"{start}~{hashlib.sha256(os.fsencode(name)).hexdigest()[:12]}"


def side_name(target: Path, kind: str) -> Path:
    """A fresh name beside ``target`` for a new (``tmp``) or a previous (``old``) export of this process."""
    return target.parent / f".{_side_stem(target)}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def recover_leftovers(target: Path, is_export: Callable[[Path], bool], *, remove_others: bool = True) -> Optional[Path]:
    """Put back a previous export a killed process left beside an empty ``target``, and (unless
    ``remove_others`` is False: a load, which only reads) remove the other folders killed
    processes left there; returns the export put back, if any.

    Only folders named as :func:`side_name` names them, of a process that no longer runs, are
    touched; a link or a file of such a name is left alone.
    """
    pattern = re.compile(re.escape(f".{_side_stem(target)}.") + r"(tmp|old)-(\d+)-[0-9a-f]{8}")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return None
    restored = None
    for name in sorted(names):
        found = pattern.fullmatch(name)
        if found is None or _alive(int(found.group(2))):
            continue
        leftover = target.parent / name
        try:
            if not stat.S_ISDIR(os.lstat(leftover).st_mode):
                continue
            if found.group(1) == "old" and not os.path.lexists(target) and is_export(leftover):
                os.rename(leftover, target)
                restored = target
                continue
        except OSError:
            continue
        if remove_others:
            shutil.rmtree(leftover, ignore_errors=True)
    return restored


__all__ = ["exchange", "recover_leftovers", "side_name"]
