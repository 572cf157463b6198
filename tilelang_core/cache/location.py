"""Where the kernel cache lives, and whether that place is safe to load native code from."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import Optional

from ..errors import CacheError
from . import trust

#: Environment variable naming the cache directory.
CACHE_DIR_ENV = "TILELANG_CACHE_DIR"
#: Environment variable that disables the cache (memory and disk) when set to 1/true/yes/on.
DISABLE_ENV = "TILELANG_DISABLE_CACHE"


def cache_disabled() -> bool:
    """Whether ``TILELANG_DISABLE_CACHE`` turns the kernel cache off.

    Before, a value it did not know (``2``, ``bogus``, a typo of ``true``) silently meant
    "enabled". Now the usual spellings are read (``1``/``true``/``yes``/``on`` off,
    ``0``/``false``/``no``/``off`` or empty or unset on, any case) and another value is an error.

    :raises SettingError: the value is none of these, naming the variable and what it accepts.
    """
    from ..env_switches import switch_from_env

    return switch_from_env(DISABLE_ENV, "turn the kernel cache off", "keep it on")


def default_cache_dir() -> Path:
    """``$TILELANG_CACHE_DIR``, else the platform's user cache directory plus ``tilelang``.

    Raises :class:`CacheError` when ``$TILELANG_CACHE_DIR`` starts with a ``~`` that cannot be
    expanded (an unknown user). A blank value counts as unset; a relative one is taken from the
    current directory where the process first uses it and written back into ``os.environ`` as
    that absolute path (so it stays there, for the processes it starts too).

    Linux and other Unix: ``$XDG_CACHE_HOME/tilelang`` (``~/.cache/tilelang``); macOS:
    ``~/Library/Caches/tilelang``; Windows: ``%LOCALAPPDATA%\\tilelang\\Cache``.
    """
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit and explicit.strip():  # blank: unset, as other settings read it (it made a folder ' ')
        try:
            if explicit == "~" or explicit.startswith("~/"):  # the home _home() gives (an empty HOME meant /)
                path = _home() / explicit[2:]
            else:
                path = Path(explicit).expanduser()
        except RuntimeError as exc:  # ~user that does not exist, or no home directory
            raise CacheError(f"{CACHE_DIR_ENV}={explicit!r}: cannot expand '~' ({exc}); set it to an absolute "
                             f"path") from None
        if path.is_absolute():
            return path
        # relative: from the current directory where this process first uses it, and there from
        # then on (it followed every os.chdir, one cache per folder a process visited), for the
        # processes it starts too (an autotuner's spawned workers built into another cache)
        path = path.absolute()
        os.environ[CACHE_DIR_ENV] = str(path)
        return path
    home = _home()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "tilelang"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / "tilelang" / "Cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".cache"
    return base / "tilelang"


def _home() -> Path:
    """The user's home directory: ``$HOME`` when it is an absolute path, else the password
    database's. An empty ``HOME`` made ``Path.home()`` answer ``/`` (a cache at ``/.cache``, created
    there when running as root), a relative one put the cache under the working directory.

    :raises CacheError: neither gives an absolute path (set ``TILELANG_CACHE_DIR``).
    """
    value = os.environ.get("HOME")
    if value is not None and os.path.isabs(value):
        return Path(value)
    if value is None and sys.platform == "win32":
        return Path.home()
    try:
        import pwd

        found = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):
        found = ""
    if not os.path.isabs(found):
        raise CacheError(f"no home directory for the kernel cache: HOME={value!r} is not an absolute path and the "
                         f"user database names none; set {CACHE_DIR_ENV} (or HOME) to an absolute path")
    return Path(found)


def root_place(directory: Path) -> trust.Place:
    """Wording of errors about the cache directory itself."""
    return trust.Place(
        what="kernel cache directory",
        fix_mode=f"Run `chmod 700 {directory}` or set {CACHE_DIR_ENV} to a private directory",
        fix_other=f"Set {CACHE_DIR_ENV} to a directory of your own",
        fix_path=f"Set {CACHE_DIR_ENV} to a directory under a private parent (every directory on the way there "
        f"writable only by you or root, or sticky like /tmp)",
    )


def tree_place(directory: Path) -> trust.Place:
    """Wording of errors about the folders and files inside the cache directory."""
    return trust.Place(
        what="kernel cache folder",
        fix_mode=f"Run `chmod -R go-w {directory}` (the cache makes its folders with mode 0700) or set "
        f"{CACHE_DIR_ENV} to a private directory",
        fix_other=f"Run `tilelang cache clear` (it removes what the cache did not make, and never follows a link) or "
        f"set {CACHE_DIR_ENV} to a private directory",
        fix_path=f"Set {CACHE_DIR_ENV} to a private directory",
    )


def check_private(directory: Path) -> None:
    """Refuse a cache directory that another user could write to, or redirect.

    Loading a kernel means loading native code; anyone who can write into the directory, or
    replace it (through a directory on the way to it, or a symbolic link on the way, that they
    can write to without the sticky bit) could make this process run code of theirs. See
    :mod:`tilelang_core.cache.trust`. Raises :class:`~tilelang_core.errors.CacheError` saying
    which path, why, and how to fix it, and :class:`NotADirectoryError` when the path is a file.
    """
    if not trust.enforced():  # POSIX permission bits do not apply
        return
    place = root_place(directory)
    trust.check_path(directory, place)
    st = os.stat(directory)  # the way there is checked: following the link is safe now
    if not stat.S_ISDIR(st.st_mode):
        # not a safety problem, so an OSError: the cache works in memory only, with a CacheWarning
        raise NotADirectoryError(f"{directory} is not a directory")
    trust.check_owned(directory, st, place)


def prepare_cache_dir(directory: Path) -> Path:
    """Create ``directory`` (mode 0700) if needed and check that it is private; returns it.

    The way to it is checked before anything is created. Raises :class:`CacheError` for a
    directory others can write to or redirect, and :class:`OSError` when it cannot be created or
    written (the caller then works without a disk cache).
    """
    directory = Path(directory)
    _check_path_length(directory)
    # a link in a loop or to nothing is not a safety problem: an OSError, so the cache works in
    # memory only with a CacheWarning; a loop first (the way-there check cannot follow it), a link
    # to nothing after that check (whose refusal of an unsafe way there comes first)
    problem = link_problem(directory)
    if problem is not None and _loops(directory):
        raise _os_error(errno.ELOOP, problem)
    if trust.check_path(directory, root_place(directory)) is None:
        if problem is not None:
            raise _os_error(errno.ENOENT, problem)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        try:
            os.chmod(directory, 0o700)
        except OSError:
            pass
    check_private(directory)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(f"kernel cache directory {directory} is not writable")
    return directory


def link_problem(directory: Path) -> Optional[str]:
    """Why ``directory`` names no directory because of a symbolic link on the way (a link in a
    loop, or a link whose target does not exist), for a message; None otherwise.

    Such a path can be neither created nor used: ``mkdir`` says "File exists" for a dangling
    link, the way-there check "too many levels of symbolic links" for a loop.
    """
    try:
        os.stat(directory)
        return None
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOENT):
            return None
    path = os.path.abspath(directory)
    prefixes = [path]
    while os.path.dirname(prefixes[-1]) != prefixes[-1]:
        prefixes.append(os.path.dirname(prefixes[-1]))
    for prefix in reversed(prefixes):  # from the root down: the first link that goes nowhere
        if not os.path.islink(prefix):
            continue
        try:
            os.stat(prefix)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return (f"{prefix} is a symbolic link in a loop ({_link_chain(prefix)}), so it leads to no "
                        f"directory; point one of these links at a directory")
            if exc.errno == errno.ENOENT:
                target, missing = os.readlink(prefix), os.path.realpath(prefix)
                shown = target if os.path.join(os.path.dirname(prefix), target) == missing else f"{target} ({missing})"
                return (f"{prefix} is a symbolic link to {shown}, which does not exist; create {missing} or point "
                        f"the link at a directory")
    return None


def _os_error(code: int, message: str) -> OSError:
    """An ``OSError`` of ``errno`` ``code`` whose text is ``message`` alone (no ``[Errno N]``)."""
    exc = OSError(message)
    exc.errno = code
    return exc


def _loops(directory: Path) -> bool:
    """Whether resolving ``directory`` meets too many symbolic links (a loop)."""
    try:
        os.stat(directory)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _link_chain(link: str, most: int = 8) -> str:
    """``a -> b -> a``: the links followed from ``link`` until one repeats (at most ``most``)."""
    seen, chain, current = set(), [link], link
    while current not in seen and len(chain) <= most:
        seen.add(current)
        try:
            target = os.readlink(current)
        except OSError:
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
        chain.append(current)
    return " -> ".join(chain)


#: Bytes the cache adds to its directory's path at most (``tmp/<key>.<pid>.<id>/backend/<file>``).
ENTRY_PATH_ROOM = 256


def _check_path_length(directory: Path) -> None:
    """Refuse a directory so deep that the paths of entries under it would pass the system's
    limit (``PATH_MAX``, 4096 bytes on Linux): every compile then failed with a raw "File name
    too long" instead of caching in memory.

    :raises OSError: (``ENAMETOOLONG``) saying how long the path is and what the limit is.
    """
    from ..path_limits import path_limits

    path = os.path.abspath(directory)
    limit = path_limits(path)[1]
    length = len(os.fsencode(path))
    if length + ENTRY_PATH_ROOM > limit:
        raise OSError(errno.ENAMETOOLONG, f"the kernel cache directory's path is {length} bytes long: the files of "
                      f"entries under it would pass the system's limit of {limit} bytes for a path; set "
                      f"{CACHE_DIR_ENV} to a shorter path", str(directory))


def describe(directory: Optional[Path] = None) -> str:
    """The cache location as a user-facing string."""
    return str(directory or default_cache_dir())
