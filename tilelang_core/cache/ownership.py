"""Whether a directory is the kernel cache's own, so that the cache may clean and clear it.

The cache removes things: entries on ``tilelang cache clear``, leftovers of interrupted writes in
``tmp/``. It must never do that in a directory of the user's that ``TILELANG_CACHE_DIR`` points
at by mistake (a project folder with its own ``tmp/`` and ``kernels/``). So it marks the
directories it uses with a ``CACHEDIR.TAG`` file (the cache directory tag convention,
https://bford.info/cachedir/, which backup tools also honour) and claims a directory only when

- it has the tag, or
- it is empty (the cache created it, or the user made an empty one for it), or
- it has the layout of a cache made before the tag existed and nothing else: the folders
  ``kernels/``, ``tmp/`` and ``locks/``, optionally ``autotune/``.

Any other directory is not the cache's: it is not written to, cleaned or cleared, and the user
is told to point ``TILELANG_CACHE_DIR`` at a new or empty directory.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import uuid
from pathlib import Path

#: File name and first line of a cache directory tag (https://bford.info/cachedir/).
TAG_NAME = "CACHEDIR.TAG"
TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
TAG_TEXT = (TAG_SIGNATURE.decode() + "\n# This file is a cache directory tag created by tilelang_core (the TileLang-Core"
            " kernel cache).\n# For information about cache directory tags, see: https://bford.info/cachedir/\n")

#: The folders of a cache directory made before the tag existed (all required), and the optional one.
_LEGACY_REQUIRED = frozenset({"kernels", "tmp", "locks"})
_LEGACY_OPTIONAL = frozenset({"autotune"})

#: A tag another process is writing under a temporary name (:func:`claim` renames it into place).
_TAG_BEING_WRITTEN = re.compile(r"\.CACHEDIR\.TAG\.\d+\.[0-9a-f]{8}")
#: Names the cache gives what it writes in ``tmp/``: an entry being saved (``<key>.<pid>.<8 hex>``),
#: an entry being discarded (``trash.<32 hex>``), a tuning record being saved.
_TMP_NAMES = re.compile(r"(?:[0-9a-f]{64}\.\d+\.[0-9a-f]{8}|trash\.[0-9a-f]{32}|autotune-[0-9a-f]{64}\.\d+\.[0-9a-f]{8}\.json)")


class ForeignDirectoryError(OSError):
    """``TILELANG_CACHE_DIR`` names a directory the cache did not make and that is not empty.

    An ``OSError``: the cache then works in memory only, with a ``CacheWarning``, and
    ``tilelang cache clear`` removes nothing there.
    """


def has_tag(directory: Path) -> bool:
    """Whether ``directory`` holds a cache directory tag: a regular file (not a link) with the signature."""
    path = Path(directory) / TAG_NAME
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        return os.read(fd, len(TAG_SIGNATURE)) == TAG_SIGNATURE
    finally:
        os.close(fd)


def _looks_like_an_untagged_cache(names: set[str], directory: Path) -> bool:
    if not _LEGACY_REQUIRED <= names <= _LEGACY_REQUIRED | _LEGACY_OPTIONAL:
        return False
    try:
        return all(stat.S_ISDIR(os.lstat(directory / name).st_mode) for name in names)
    except OSError:  # removed while we looked: not the layout
        return False


def foreign_reason(directory: Path) -> str | None:
    """None when the cache may use ``directory`` (see the module docstring), else why not, for a message."""
    directory = Path(directory)
    try:
        # a tag another process is writing does not count: it is renamed into place whole
        names = {name for name in os.listdir(directory) if not _TAG_BEING_WRITTEN.fullmatch(name)}
    except FileNotFoundError:
        return None
    # the tag is read after the listing: the cache writes it before anything else, so whatever
    # another process made that the listing shows, the tag is there by now
    if has_tag(directory) or not names or _looks_like_an_untagged_cache(names, directory):
        return None
    shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
    return (f"{directory} is not a tilelang kernel cache: it is not empty ({shown}) and has no {TAG_NAME}, so the "
            f"cache will not write, clean or clear anything there. Set TILELANG_CACHE_DIR to a new or empty "
            f"directory")


def not_a_directory(path: Path) -> str | None:
    """Why the cache cannot use ``path`` when it exists and is not a directory (a file), when a
    symbolic link on the way to it is in a loop or leads nowhere, when a folder on the way is a
    file, or when the path is too long for the system, else None.

    Before, ``Path.exists()`` answered: it took a path below a file (``.../afile/sub``, ENOTDIR)
    for one that does not exist yet, so ``tilelang cache clear`` said "removed 0 cached kernels"
    and ``info`` warned of nothing, and it raised on a name too long (ENAMETOOLONG), so the
    commands ended with a raw ``[Errno 36] File name too long``. Now ``os.stat`` answers, and both
    give a reason, handled like the path that is a file.
    """
    from .location import link_problem

    path = Path(path)
    problem = link_problem(path)
    if problem is not None:
        return (f"kernel cache directory {path}: {problem}. Until then the cache keeps kernels in memory only and "
                f"has nothing there to list or clear (or set TILELANG_CACHE_DIR to a new or empty directory)")
    problem = _stat_problem(path)
    if problem is None:
        return None
    return (f"{path} {problem}, so the cache keeps kernels in memory only and has nothing there to "
            f"list or clear. Set TILELANG_CACHE_DIR to a new or empty directory")


def _stat_problem(path: Path) -> str | None:
    """What keeps ``path`` from being a directory, as words after the path; None when it is one or
    does not exist yet (the cache creates it)."""
    import errno

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return f"cannot be a directory: {_file_on_the_way(path)} is a file, not a folder"
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return "is a name too long for this system (a part of it is longer than the file system allows)"
        raise  # permission denied on the way, ...: the command says so, as before
    return None if stat.S_ISDIR(mode) else "is not a directory"


def _file_on_the_way(path: Path) -> Path:
    """The first folder on the way to ``path`` that is not a folder (ENOTDIR below it)."""
    for parent in reversed(Path(os.path.abspath(path)).parents):
        try:
            if not stat.S_ISDIR(os.stat(parent).st_mode):
                return parent
        except OSError:
            break
    return path.parent


def claim(directory: Path) -> None:
    """Make ``directory`` the cache's own: write its tag unless it has one.

    :raises ForeignDirectoryError: the directory is not the cache's (:func:`foreign_reason`).
    """
    directory = Path(directory)
    reason = foreign_reason(directory)
    if reason is not None:
        raise ForeignDirectoryError(reason)
    if has_tag(directory):
        return
    # written whole under a temporary name, then renamed: other processes claiming the same new
    # directory never see a partial tag (which would make the directory look foreign to them)
    partial = directory / f".{TAG_NAME}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(TAG_TEXT)
        os.replace(partial, directory / TAG_NAME)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


def is_cache_tmp_name(name: str) -> bool:
    """Whether a name in ``tmp/`` is one the cache gives what it writes there."""
    return bool(_TMP_NAMES.fullmatch(name))
