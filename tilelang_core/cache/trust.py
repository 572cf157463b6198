"""Whether a place is safe to load native code from: one check for the cache and ``tilelang.load``.

Loading a kernel runs native code from files on disk. Anyone who can write those files, or a
directory holding them, or a directory on the way to them (so they can swap a name for one of
their own), could make this process run their code. The rules, applied by the kernel cache to
its directory tree and by :func:`tilelang.load` to an exported kernel:

* **the way there** (:func:`check_path`): every directory that is searched while the path is
  resolved, following each symbolic link exactly as the operating system does (the link's own
  directory and every component of its target), must not be writable by group or others, unless
  it has the sticky bit (like ``/tmp``); and what is found inside such a sticky directory must
  belong to this user (or root);
* **the place itself** (:func:`check_owned`): every directory and file the code is read from is a
  real directory or regular file (not a link), belongs to this user (or root) and is not
  writable by group or others.

A failure raises :class:`~tilelang_core.errors.CacheError` naming the path, why it is unsafe and
what to do. Permission bits do not apply on Windows, where nothing is checked. Root bypasses
access permissions, but the bits are read from ``stat`` and checked all the same.

Imports nothing beyond the standard library.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import CacheError

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_MAX_LINKS = 40  # as Linux's own limit on links followed while resolving one path


@dataclass(frozen=True)
class Place:
    """How to talk about the place being checked in an error message."""

    what: str
    """e.g. 'kernel cache directory' or 'exported kernel'."""
    fix_mode: str
    """What to do about a path others can write to (appended to the message)."""
    fix_other: str
    """What to do about a path that belongs to someone else or is not a plain file/directory."""
    fix_path: str
    """What to do about a directory or link on the way to the path that others control."""
    consequence: str = "loading native code from it would run whatever they put there"


#: A checker: called with a path and its ``lstat`` result, raises :class:`CacheError` if unsafe.
Check = Callable[[Path, os.stat_result], None]


def enforced() -> bool:
    """Whether POSIX permission bits are checked on this platform."""
    return sys.platform != "win32"


def trusted_uid(uid: int) -> bool:
    """This process's user or root."""
    return uid == os.geteuid() or uid == 0


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def describe_kind(st: os.stat_result) -> str:
    """'a symbolic link', 'a directory', 'a regular file', 'a FIFO', ... for ``st``."""
    return _kind(st)


def check_owned(path: Path, st: os.stat_result, place: Place) -> None:
    """Refuse ``path`` (with its ``lstat`` result) unless it is ours and only we can write it.

    Directories and regular files pass when they belong to this user (or root) and have no
    group/other write bit; anything else (a link, a FIFO, a device) is refused too.
    """
    if not enforced():
        return
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise CacheError(
            f"{place.what} {path} is {_kind(st)}, not a directory or regular file, so it was not written by "
            f"tilelang. {place.fix_other}"
        )
    if not trusted_uid(st.st_uid):
        raise CacheError(
            f"{place.what} {path} belongs to another user (uid {st.st_uid}); loading native code from it would run "
            f"whatever that user put there. {place.fix_other}"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & _OTHERS_WRITE:
        who = "other users" if mode & stat.S_IWOTH else "other users of its group"
        raise CacheError(
            f"{place.what} {path} is writable by {who} (mode {mode:#o}); {place.consequence}. {place.fix_mode}"
        )


def check_owned_dir(path: Path, st: os.stat_result, place: Place) -> None:
    """:func:`check_owned` for a path that must be a real directory (not a link, not a file)."""
    if enforced() and not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"{place.what} {path} is {_kind(st)}, not a directory, so it was not made by tilelang. "
                         f"{place.fix_other}")
    check_owned(path, st, place)


def checker(place: Place) -> Check:
    """A :data:`Check` applying :func:`check_owned` with ``place``'s wording."""

    def check(path: Path, st: os.stat_result) -> None:
        check_owned(path, st, place)

    return check


def check_path(path: os.PathLike, place: Place) -> Optional[Path]:
    """Check the way to ``path`` and return where it resolves to (None: it does not exist yet).

    The path is resolved one component at a time, as the kernel does, without trusting any
    prefix: each directory a name is looked up in must not be writable by group or others
    (unless sticky, and then the name found must belong to this user or root); a symbolic link
    is followed by checking its target's components the same way. The last component itself is
    not judged here (see :func:`check_owned`).

    :raises CacheError: a directory on the way that others could use to swap the path.
    :raises NotADirectoryError: a component that should be a directory is a file.
    """
    if not enforced():
        return Path(path)
    raw = os.fspath(path)
    if not os.path.isabs(raw):
        raw = os.path.join(os.getcwd(), raw)
    todo = raw.split("/")[::-1]  # a stack: the next component is at the end
    current = "/"
    links = 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)  # `current` is already resolved
            continue
        dst = os.stat(current)
        if not stat.S_ISDIR(dst.st_mode):
            raise NotADirectoryError(f"{place.what} {raw}: {current} is not a directory")
        dmode = stat.S_IMODE(dst.st_mode)
        shared = bool(dmode & _OTHERS_WRITE)
        if shared and not dmode & stat.S_ISVTX:
            raise CacheError(
                f"{place.what} {path} is reached through {current}, which other users can write to (mode {dmode:#o}, "
                f"no sticky bit), so they could replace what {path} points to. {place.fix_path}"
            )
        candidate = os.path.join(current, name)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            return None  # the rest would be created inside `current`, which passed
        if shared and not trusted_uid(st.st_uid):
            raise CacheError(
                f"{place.what} {path} is reached through {candidate}, which belongs to another user (uid {st.st_uid}) "
                f"in the shared directory {current}. {place.fix_path}"
            )
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise CacheError(f"{place.what} {path}: too many levels of symbolic links. {place.fix_other}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            todo.extend(target.split("/")[::-1])
            continue
        current = candidate
    return Path(current)


__all__ = ["Check", "Place", "check_owned", "check_owned_dir", "check_path", "checker", "describe_kind", "enforced", "trusted_uid"]
