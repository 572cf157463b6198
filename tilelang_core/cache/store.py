"""The kernel cache: a memory layer in front of a directory of saved kernels.

Disk layout under the cache directory (mode 0700)::

    CACHEDIR.TAG             marks the directory as the cache's own (:mod:`tilelang_core.cache.ownership`)
    kernels/<k[:2]>/<key>/   one entry per key (see :mod:`tilelang_core.cache.entry`)
    tmp/                     entries being written; renamed into kernels/ when complete
    locks/<key>.lock         fcntl locks: one process builds a key, the others wait and load it

A backend that does not implement both ``tilelang_backend_save`` and ``tilelang_backend_load``
is cached in memory only. The cache never makes a symbolic link, never follows one when it
removes things, and loads only from folders and files that this user alone can write
(:mod:`tilelang_core.cache.trust`). It uses, cleans and clears only a directory that is its own
(tagged, empty, or laid out as an older cache): a user's folder named by mistake is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import sys
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from ..fork_locks import renew_after_fork
from ..errors import ArtifactError, BuildError, CacheError, SettingError
from ..flock_wait import flock_within
from ..warning_location import warn
from . import entry as E
from . import leftovers, ownership, trust
from .location import CACHE_DIR_ENV, cache_disabled, check_private, default_cache_dir, prepare_cache_dir, tree_place
from .native import noexec_folder

if TYPE_CHECKING:
    from ..backends.registry import BackendRecord
    from ..jit.kernel import JITKernel

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: in-process locking only
    fcntl = None  # type: ignore[assignment]


class NoexecCacheDirectory(OSError):
    """The cache directory is on a file system mounted ``noexec``: no kernel library can be loaded
    from it, so the cache is used in memory only."""


class CacheWarning(UserWarning):
    """A cache entry was unusable (removed and rebuilt) or the disk cache is unavailable."""


#: Most kernels the memory layer keeps (least recently used ones are dropped first).
MEMORY_CAPACITY = 4096


class MemoryCache:
    """Thread-safe LRU of compiled kernels by cache key."""

    def __init__(self, capacity: int = MEMORY_CAPACITY) -> None:
        self.capacity = capacity
        self._items: "OrderedDict[str, JITKernel]" = OrderedDict()
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")

    def get(self, key: str) -> "Optional[JITKernel]":
        with self._lock:
            kernel = self._items.get(key)
            if kernel is not None:
                self._items.move_to_end(key)
            return kernel

    def put(self, key: str, kernel: "JITKernel") -> None:
        with self._lock:
            self._items[key] = kernel
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def _remove(path: Path) -> Optional[str]:
    """Remove ``path`` without ever following a link: a real directory is deleted with its
    contents (``shutil.rmtree``, which does not follow links inside either), anything else (a
    file, a link, a FIFO) is unlinked.

    Returns None when ``path`` is gone (or was never there), else why it is not, naming what
    could not be deleted (a folder that cannot be written, a read-only file system).
    """
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _cannot("delete", path, exc)
    failures: list[str] = []
    _rmtree(path, failures)
    if not os.path.lexists(path):
        return None
    return failures[0] if failures else f"cannot delete {path}: it is still there after removing it"


def _rmtree(path: Path, failures: list[str]) -> None:
    """``shutil.rmtree(path)``, going on past errors; each one (but a file already gone) is
    appended to ``failures`` as a message."""

    def note(function: Any, failed: str, error: Any) -> None:
        exc = error[1] if isinstance(error, tuple) else error
        if not isinstance(exc, FileNotFoundError):
            failures.append(_cannot("delete", failed, exc))

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=note)
    else:  # pragma: no cover - onerror is deprecated from 3.12
        shutil.rmtree(path, onerror=note)


def _cannot(what: str, path: Any, exc: BaseException, into: Optional[Path] = None) -> str:
    """``cannot delete <path>: Operation not permitted`` (``cannot move <path> into <into> to delete it: ...``)."""
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    where = f" into {into} to delete it" if into is not None else ""
    return f"cannot {what} {path}{where}: {why}"


#: Environment variable: seconds a process waits for another one building the same kernel.
LOCK_WAIT_ENV = "TILELANG_CACHE_LOCK_TIMEOUT"
DEFAULT_LOCK_WAIT_S = 600.0


def lock_wait_s() -> float:
    """Seconds to wait for another process building the same kernel (:data:`LOCK_WAIT_ENV`).

    :raises SettingError: the variable is set but not a number of seconds in [0, 1000000]
        (:func:`tilelang_core.env_numbers.seconds_from_env`).
    """
    from ..env_numbers import seconds_from_env

    return seconds_from_env(LOCK_WAIT_ENV, DEFAULT_LOCK_WAIT_S, zero_allowed=True, zero_means="build without waiting",
                            example="1200")


_SHARD_NAME = re.compile(r"[0-9a-f]{2}")
_KEY_NAME = re.compile(r"[0-9a-f]{64}")
_SUBDIRS = ("kernels", "tmp", "locks")


class DiskCache:
    """Saved kernels under one directory (created 0700 and refused when others can write to it).

    Every folder and file kernels are loaded from (the root, ``kernels/``, each shard, each
    entry and everything in it) must belong to this user and be writable by nobody else (see
    :mod:`tilelang_core.cache.trust`); otherwise loading raises :class:`CacheError`.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._prepared = False
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")
        self._place = tree_place(self.root)
        self._check = trust.checker(self._place)

    @property
    def kernels_dir(self) -> Path:
        return self.root / "kernels"

    def _subdirs_ok(self) -> bool:
        """Whether kernels/, tmp/ and locks/ exist; raises CacheError when one is unsafe."""
        return all(self._subdir_ok(sub) for sub in _SUBDIRS)

    def _subdir_ok(self, sub: str) -> bool:
        """Whether the cache's folder ``sub`` exists; raises CacheError when it is unsafe (a file,
        a link, a folder of someone else's)."""
        path = self.root / sub
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        if stat.S_ISREG(st.st_mode) and sub != "tmp" and trust.enforced():
            # `tilelang cache clear` keeps such files (it removes a tmp file), so it is no remedy here
            raise CacheError(
                f"kernel cache folder {path} is a regular file, where the cache keeps its {sub}/ folder, so it "
                f"was not made by tilelang. Move or delete it (tilelang cache clear keeps files it did not "
                f"make), or set {CACHE_DIR_ENV} to another directory")
        trust.check_owned_dir(path, st, self._place)
        return True

    def subdir_problems(self) -> list[str]:
        """Why each of the cache's folders kernels/, tmp/ and locks/ that exists is unusable (the
        :class:`CacheError` a compile would raise for it); empty when none is."""
        problems = []
        for sub in _SUBDIRS:
            try:
                self._subdir_ok(sub)
            except (CacheError, OSError) as exc:
                problems.append(str(exc))
        return problems

    def prepare(self) -> None:
        """Create the directory tree and check it is private.

        The full check (owner, mode, the way to the directory) runs once per instance; later
        calls re-check the directory's own mode and its three folders (four ``stat`` calls), so a
        directory that became writable by others, or was deleted, while this process runs is
        noticed.
        """
        with self._lock:
            if self._prepared:
                try:
                    st = os.stat(self.root)
                    present = self._subdirs_ok()
                except FileNotFoundError:
                    present = False
                if present and st.st_mode & 0o022 == 0:
                    return
                self._prepared = False
            prepare_cache_dir(self.root)
            if noexec_folder(self.root) is not None:  # every entry's load failed, was removed and rebuilt
                raise NoexecCacheDirectory(errno.EACCES, "it is on a file system mounted noexec, from which no "
                                           "kernel library can be loaded")
            ownership.claim(self.root)  # ForeignDirectoryError (an OSError): memory only, nothing touched
            for sub in _SUBDIRS:
                with contextlib.suppress(FileExistsError):
                    (self.root / sub).mkdir(mode=0o700)
            self._subdirs_ok()
            self._remove_stale_tmp()
            self._prepared = True

    def _remove_stale_tmp(self, max_age: float = leftovers.STALE_AGE_S) -> None:
        """Remove what interrupted writers (killed processes) left in tmp/ more than a day ago.

        Only names the cache gives what it writes there are removed; anything else is left.
        """
        import time

        now = time.time()
        try:
            children = list((self.root / "tmp").iterdir())
        except OSError:
            return
        for child in children:
            if not ownership.is_cache_tmp_name(child.name):
                continue
            try:
                if now - child.lstat().st_mtime > max_age:
                    _remove(child)
            except OSError:
                pass

    def entry_dir(self, key: str) -> Path:
        return self.kernels_dir / key[:2] / key

    # -- locking ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, key: str, doing: str = "building the kernel of key") -> Iterator[bool]:
        """Hold an exclusive file lock for ``key`` (waits while another process builds it).
        ``doing`` says in the warnings what the holder does with the key (the autotuner's
        tuning store: "tuning key").

        Yields True when the lock is held. A process that has held it for more than
        :func:`lock_wait_s` seconds (``$TILELANG_CACHE_LOCK_TIMEOUT``, default 600: stopped with
        Ctrl-Z, or hung) is not waited for longer: a :class:`CacheWarning` says so and this
        process builds the kernel itself (yields False). A lock file that cannot be made (a full disk, a
        directory or other junk in its place) yields False with a :class:`CacheWarning`: the
        caller builds without waiting for other processes, as a cache miss would. A symbolic
        link in its place is removed, never followed (the link's target is not touched).
        """
        if fcntl is None:  # pragma: no cover
            yield False
            return
        path = self.root / "locks" / f"{key}.lock"
        try:
            fd = self._open_lock(path)
        except OSError as exc:
            warn(
                f"kernel cache lock file for key {key[:16]}... could not be opened ({exc}); going on without "
                f"waiting for other processes {doing} it. Remove {path} if it is not a file",
                CacheWarning,
            )
            yield False
            return
        held = False
        try:
            wait_s = lock_wait_s()
            held = flock_within(fd, wait_s) is not None
            if not held:
                warn(
                    f"another process has been {doing} {key[:16]}... for over {wait_s:g} s "
                    f"(it holds {path}: stopped, or hung?); {doing.split()[0]} it here too without "
                    f"waiting. Set {LOCK_WAIT_ENV} to wait longer",
                    CacheWarning,
                )
            yield held
        finally:
            try:
                if held:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def _open_lock(self, path: Path) -> int:
        """A descriptor of the lock file ``path`` (created if missing; a symlink there is replaced)."""
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        for attempt in (1, 2, 3):
            try:
                return os.open(path, flags, 0o600)
            except FileNotFoundError:  # the directory was removed under us: recreate it
                if attempt == 3:
                    raise
                self.prepare()
            except OSError:
                if attempt == 3 or not path.is_symlink():
                    raise
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()  # the link itself, in the cache's own locks/ directory
        raise AssertionError("unreachable")  # pragma: no cover

    # -- load / save --------------------------------------------------------------------------

    def load(self, key: str, record: "BackendRecord") -> "Optional[JITKernel]":
        """The kernel saved under ``key``, or None.

        An entry that is truncated, corrupt, of another format or backend version, or that the
        backend refuses to load is removed with a :class:`CacheWarning`; an entry that vanishes
        while being read (a concurrent ``cache clear``) is just a miss.
        """
        from ..jit.kernel import BackendInfo, JITKernel

        directory = self._checked_entry_dir(key)
        if directory is None:
            return None
        try:
            meta = E.read_meta(directory, check=self._check)
        except FileNotFoundError:
            if os.path.isdir(directory):  # never written without it: a broken entry, not one being written
                self._discard(directory, f"its metadata file {E.META_FILE} is missing")
            return None
        except (ArtifactError, OSError, UnicodeDecodeError) as exc:
            self._discard(directory, f"unreadable metadata ({exc})")
            return None
        problem = None
        if meta.kind != "cache" or meta.key != key:
            problem = f"it was saved for key {meta.key}"
        elif meta.backend.name != record.name or meta.backend.version != (record.version or "0"):
            problem = (
                f"it was built by backend {meta.backend.name} {meta.backend.version}, not "
                f"{record.name} {record.version or '0'}"
            )
        if problem:
            self._discard(directory, problem)
            return None
        try:
            E.verify_files(directory, meta, check=self._check)
            artifact = E.read_artifact(directory, meta)
            runner = E.load_runner(directory, meta, artifact, record)
        except FileNotFoundError:
            if directory.exists():
                self._discard(directory, "a file is missing")
            return None
        except SettingError:  # a variable the backend reads is wrong, not the entry: it stays
            raise
        except (ArtifactError, OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
            self._discard(directory, str(exc))
            return None
        with contextlib.suppress(OSError):
            os.utime(directory)  # last use, for prune()
        return JITKernel.create(runner, artifact, BackendInfo(record.name, record.version or "0"), meta.options)

    def _checked_entry_dir(self, key: str) -> Optional[Path]:
        """The entry folder of ``key`` after checking its shard and itself (None: not there).

        Something other than a folder where the entry should be is removed (never followed)
        with a :class:`CacheWarning`; a shard or entry others could write to raises
        :class:`CacheError`.
        """
        directory = self.entry_dir(key)
        try:
            st = os.lstat(directory.parent)
        except FileNotFoundError:
            return None
        trust.check_owned_dir(directory.parent, st, self._place)
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            self._discard(directory, f"it is {trust.describe_kind(st)}, not an entry folder")
            return None
        trust.check_owned(directory, st, self._place)
        return directory

    def save(self, key: str, kernel: "JITKernel", record: "BackendRecord") -> bool:
        """Write ``kernel`` under ``key`` (complete in tmp/, then renamed); False when it could not."""
        tmp = self.root / "tmp" / f"{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        try:
            self.prepare()
            tmp.mkdir(mode=0o700)
            E.write_entry(tmp, kernel.runner, kernel.artifact, kernel.options, record, kind="cache", key=key)
            final = self.entry_dir(key)
            with contextlib.suppress(FileExistsError):
                final.parent.mkdir(mode=0o700)
            trust.check_owned_dir(final.parent, os.lstat(final.parent), self._place)
            for attempt in (1, 2):
                try:
                    os.rename(tmp, final)
                    return True
                except OSError:
                    if not os.path.lexists(final):
                        raise
                    if attempt == 2 or os.path.isfile(final / E.META_FILE):
                        _remove(tmp)  # another process saved it first
                        return True
                    # a broken entry (no metadata, or not a folder) is in the way: replace it
                    self._discard(final, f"its metadata file {E.META_FILE} is missing")
            return True  # pragma: no cover - the loop always returns
        except (OSError, ArtifactError, BuildError, ValueError, TypeError) as exc:
            # BuildError: a backend's save step may run a compiler (CUDA code with nvcc, say)
            with contextlib.suppress(OSError):  # the cause may forbid this too (ENAMETOOLONG, EIO)
                _remove(tmp)
            warn(
                f"kernel {kernel.name!r} could not be saved to the cache at {self.root}: {exc}; it stays in memory only",
                CacheWarning,
            )
            return False
        except BaseException:  # Ctrl-C while writing (or a backend's save hook raising past Exception)
            with contextlib.suppress(OSError):  # else the half-written folder stays in tmp/ for a day
                _remove(tmp)
            raise

    def _discard(self, directory: Path, why: str) -> None:
        """Remove the unusable entry ``directory`` (renamed first: a concurrent reader never sees
        a half-deleted entry) with a :class:`CacheWarning` saying why, and whether it went."""
        problem = self._trash(directory)
        if problem is None:
            message = f"removed unusable kernel cache entry {directory}: {why}; rebuilding it"
        else:
            message = (f"kernel cache entry {directory} is unusable ({why}) and could not be removed ({problem}); "
                       f"rebuilding the kernel. Make the folder writable and run `tilelang cache clear`")
        warn(message, CacheWarning)

    # -- inspection ---------------------------------------------------------------------------

    def scan(self) -> tuple[list[Path], list[tuple[Path, str]]]:
        """``(entry folders, junk)`` under ``kernels/``, found without following any link.

        Entries are real folders ``kernels/<k[:2]>/<key>``; everything else there (files,
        links, FIFOs, folders of other names, a ``kernels`` or shard that is itself a link) is
        junk, listed with what it is.
        """
        entries: list[Path] = []
        junk: list[tuple[Path, str]] = []
        try:
            st = os.lstat(self.kernels_dir)
        except FileNotFoundError:
            return entries, junk
        if not stat.S_ISDIR(st.st_mode):
            return entries, [(self.kernels_dir, trust.describe_kind(st))]
        for shard, sst in _children(self.kernels_dir):
            if not (stat.S_ISDIR(sst.st_mode) and _SHARD_NAME.fullmatch(shard.name)):
                junk.append((shard, trust.describe_kind(sst)))
                continue
            for directory, est in _children(shard):
                if stat.S_ISDIR(est.st_mode) and _KEY_NAME.fullmatch(directory.name) and directory.name[:2] == shard.name:
                    entries.append(directory)
                else:
                    junk.append((directory, trust.describe_kind(est)))
        return entries, junk

    def entries(self) -> list[tuple[Path, Optional[E.EntryMeta]]]:
        """Every entry directory with its metadata (None when unreadable or of another tilelang-core)."""
        return [(directory, meta) for directory, meta, _ in self.survey()]

    def survey(self) -> list[tuple[Path, Optional[E.EntryMeta], Optional[str]]]:
        """Every entry directory with its metadata, or with None and, when another tilelang-core
        wrote it (another format, fields this one does not know), who did (``tilelang-core 0.2.0,
        format 2``): such an entry is not corrupt, that core loads it. None and None: unreadable."""
        out: list[tuple[Path, Optional[E.EntryMeta], Optional[str]]] = []
        for directory in self.scan()[0]:
            meta: Optional[E.EntryMeta] = None
            writer = None
            try:
                meta = E.read_meta(directory)
            except E.ForeignEntryError as exc:
                writer = exc.writer
            except (OSError, ArtifactError, UnicodeDecodeError):
                pass
            out.append((directory, meta, writer))
        return out

    def clear(self) -> dict[str, Any]:
        """Remove every entry, leftovers of interrupted writes, and junk files and links.

        Never follows a link: a ``kernels/`` or shard that is a link, and files or links among
        the entries, are unlinked (what they point to is untouched). Folders the cache did not
        create (other names) are kept and reported, and so is anything in ``tmp/`` that the cache
        did not write, or that another process may still be writing (``in_use``: see
        :mod:`tilelang_core.cache.leftovers`). The autotuner's stored results go too. What could
        not be removed (a folder that cannot be written) is not counted but listed in ``failed``.
        Returns ``{"entries": n, "tuning_records": n, "removed_junk": [paths], "kept": [paths],
        "in_use": [{"path", "why"}], "failed": [{"path", "error"}]}``.

        :raises CacheError: the directory is not the cache's own
            (:func:`~tilelang_core.cache.ownership.foreign_reason`); nothing is removed.
        """
        reason = ownership.foreign_reason(self.root)
        if reason is not None:
            raise CacheError(reason)
        report: dict[str, Any] = {"entries": 0, "tuning_records": 0, "removed_junk": [], "kept": [], "in_use": [],
                                  "failed": []}
        self._clear_tmp(report)  # first: the trash of entries that could not be deleted below is not listed twice
        entries, junk = self.scan()
        for directory in entries:
            _tally(report, "entries", directory, self._trash(directory))
        for path, kind in junk:
            _clear_junk(report, path, kind)
        with contextlib.suppress(OSError):
            for shard, sst in _children(self.kernels_dir):
                if stat.S_ISDIR(sst.st_mode) and _SHARD_NAME.fullmatch(shard.name):
                    with contextlib.suppress(OSError):
                        shard.rmdir()  # only when empty
        self._clear_tuning_records(report)
        self._clear_idle_locks(report)
        return report

    def _clear_tmp(self, report: dict[str, Any]) -> None:
        """Remove what the cache left in ``tmp/`` (``tmp/`` itself when it is not a folder), but
        what another process may still be writing (listed in ``in_use``) and names the cache does
        not give (listed in ``kept``)."""
        tmp = self.root / "tmp"
        try:
            st = os.lstat(tmp)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            _tally(report, "removed_junk", tmp, _remove(tmp))
            return
        now = time.time()
        for child, cst in _children(tmp):
            if not ownership.is_cache_tmp_name(child.name):
                report["kept"].append(str(child))
                continue
            # trash is only ever deleted: deleting it along with a concurrent clear is harmless
            busy = None if child.name.startswith("trash.") else leftovers.busy_reason(child.name, cst.st_mtime, now)
            if busy is not None:
                report["in_use"].append({"path": str(child), "why": busy})
            else:
                _tally(report, None, child, _remove(child))

    def prune(self, older_than_days: float) -> dict[str, Any]:
        """Remove the entries no process will load again or none has used for a while.

        An entry goes when its backend's distribution is not installed, or installed in another
        version (such entries are never loaded), when its metadata cannot be read (corrupt), or
        when it was neither saved nor loaded in the last ``older_than_days`` days (a disk hit
        marks it used). An entry another tilelang-core wrote (another format version, or fields
        this one does not know) goes only for the last reason: that core may load it. Idle lock
        files go too. Returns how many entries went, per reason, the number of entries of other
        tilelang-cores kept (``other_core_kept``), and what could not be removed (``failed``:
        ``[{"path", "error"}]``, not counted).

        :raises CacheError: the directory is not the cache's own; nothing is removed.
        """
        reason = ownership.foreign_reason(self.root)
        if reason is not None:
            raise CacheError(reason)
        cutoff = time.time() - older_than_days * 86400
        report: dict[str, Any] = {"unused": 0, "not_installed": 0, "unreadable": 0, "other_core_kept": 0, "failed": []}
        installed: dict[Any, Optional[str]] = {}  # one metadata lookup per backend, not per entry
        for directory, meta, writer in self.survey():
            why = self._prune_reason(directory, meta, writer is not None, cutoff, installed)
            if why is None:
                report["other_core_kept"] += writer is not None
                continue
            _tally(report, why, directory, self._trash(directory))
        self._clear_idle_locks()
        return report

    @staticmethod
    def _prune_reason(directory: Path, meta: Optional[E.EntryMeta], other_core: bool, cutoff: float,
                      installed: dict[Any, Optional[str]]) -> Optional[str]:
        """Why :meth:`prune` removes an entry (a key of its report), or None to keep it."""
        if meta is None and not other_core:
            return "unreadable"
        if meta is not None:
            if meta.backend not in installed:
                installed[meta.backend] = _installed_version(meta.backend)
            if installed[meta.backend] != meta.backend.version:
                return "not_installed"
        try:
            used = os.lstat(directory).st_mtime
        except FileNotFoundError:
            return None
        return "unused" if used < cutoff else None

    def _trash(self, directory: Path) -> Optional[str]:
        """Remove an entry: renamed into ``tmp/`` first (one step), so that an interrupted clear
        leaves whole entries or trash (removed by the next clear), never a half-deleted entry.

        Returns None when the entry is gone (also when another process removed it meanwhile),
        else why not, naming the path. An entry that cannot be moved (its shard or ``tmp/``
        cannot be written) is left whole; it is deleted where it is only when ``tmp/`` is not a
        folder or is on another file system.
        """
        tmp = self.root / "tmp"
        trash = tmp / f"trash.{uuid.uuid4().hex}"
        for attempt in (1, 2):
            try:
                if os.path.islink(tmp):  # never through a link (a prune moved entries into its target)
                    raise OSError(errno.ENOTDIR, "not a folder", str(tmp))
                os.rename(directory, trash)
                break
            except OSError as exc:
                if not os.path.lexists(directory):
                    return None  # removed meanwhile (a concurrent clear)
                if exc.errno == errno.ENOENT and attempt == 1 and not os.path.lexists(tmp):
                    with contextlib.suppress(OSError):
                        tmp.mkdir(mode=0o700)  # removed (a clear of a tmp/ that was a file): made again
                    continue
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EXDEV):
                    return f"{_cannot('move', directory, exc, into=tmp)}; the entry was left whole"
                trash = directory  # tmp/ is not a folder, or on another file system: delete it in place
                break
        problem = _remove(trash)
        if problem is None or trash == directory:
            return problem
        return f"{directory} was moved to {trash} but not deleted ({problem})"

    def _clear_idle_locks(self, report: Optional[dict[str, Any]] = None) -> None:
        """Unlink the lock files of ``locks/`` that no process holds (one per key ever built,
        ``<key>.lock``); anything else there is not the cache's and stays (listed in the clear
        ``report``'s ``kept`` when given: a user's ``deploy.lock`` in an adopted folder went
        before). A ``locks`` that is not a real folder is never followed: a link (or other special
        file) is unlinked, a regular file kept, as :func:`_clear_junk` does (a link to a folder of
        the user's had its ``<key>.lock`` files deleted)."""
        if fcntl is None:  # pragma: no cover
            return
        locks = self.root / "locks"
        try:
            st = os.lstat(locks)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            if report is not None:
                _clear_junk(report, locks, trust.describe_kind(st))
            return
        for path, st in _children(locks):
            if not (stat.S_ISREG(st.st_mode) and path.name.endswith(".lock")
                    and _KEY_NAME.fullmatch(path.name[: -len(".lock")])):
                if report is not None:
                    report["kept"].append(str(path))
                continue
            try:
                fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue
            try:
                if flock_within(fd, 0) is not None:  # else a process is building this key now
                    with contextlib.suppress(OSError):
                        path.unlink()
            except OSError:  # no lock to be had: left alone
                pass
            finally:
                os.close(fd)

    def _clear_tuning_records(self, report: dict[str, Any]) -> None:
        """Remove the autotuner's records (``autotune/<k[:2]>/<key>.json``) without following links.

        Records removed are counted in the clear ``report``'s ``tuning_records``; files and links
        of other shapes there are unlinked and listed in ``removed_junk``; folders of other names
        are kept and listed in ``kept``; what could not be removed is listed in ``failed``.
        """
        base = self.root / "autotune"
        try:
            st = os.lstat(base)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            _clear_junk(report, base, trust.describe_kind(st))
            return
        for shard, sst in _children(base):
            if not (stat.S_ISDIR(sst.st_mode) and _SHARD_NAME.fullmatch(shard.name)):
                _clear_junk(report, shard, trust.describe_kind(sst))
                continue
            for path, fst in _children(shard):
                is_record = stat.S_ISREG(fst.st_mode) and path.suffix == ".json" and _KEY_NAME.fullmatch(path.stem)
                if is_record:
                    _tally(report, "tuning_records", path, _remove(path))
                else:
                    _clear_junk(report, path, trust.describe_kind(fst))
            with contextlib.suppress(OSError):
                shard.rmdir()  # only when empty


_KEPT_KINDS = ("a directory", "a regular file")  # as trust.describe_kind names them


def _clear_junk(report: dict[str, Any], path: Path, kind: str) -> None:
    """What ``clear`` does with an item the cache did not name: folders and regular files are
    kept and listed in ``kept`` (the cache never writes either outside its entries and records,
    so someone put them there: their data is not the cache's to delete); links, FIFOs and other
    special files are unlinked (what a link points to is untouched) and listed in ``removed_junk``."""
    if kind in _KEPT_KINDS:
        report["kept"].append(str(path))
    else:
        _tally(report, "removed_junk", path, _remove(path))


def _tally(report: dict[str, Any], field: Optional[str], path: Path, problem: Optional[str]) -> None:
    """Record in a clear or prune ``report`` that ``path`` is gone (``problem`` None: counted in
    ``field``, a number or a list of paths; no field: not counted), or why not (in ``failed``)."""
    if problem is not None:
        report["failed"].append({"path": str(path), "error": problem})
    elif field is not None and isinstance(report[field], list):
        report[field].append(str(path))
    elif field is not None:
        report[field] += 1


def _is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory (following links), False where it cannot be looked at.
    ``Path.is_dir`` raised on a name too long for the system (ENAMETOOLONG), so
    ``tilelang.cache.info()`` ended with a raw ``[Errno 36] File name too long`` where the command
    names the problem; :func:`~tilelang_core.cache.ownership.not_a_directory` says why."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _children(directory: Path) -> list[tuple[Path, os.stat_result]]:
    """The entries of ``directory`` with their ``lstat``, sorted by name (empty if it is gone)."""
    try:
        with os.scandir(directory) as it:
            items = sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for item in items:
        try:
            out.append((Path(item.path), item.stat(follow_symlinks=False)))
        except FileNotFoundError:
            continue
    return out


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


class KernelCache:
    """The process-wide kernel cache: memory layer plus (when possible) a disk layer."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.memory = MemoryCache()
        self.disk = DiskCache(self.root)
        self._disk_error: Optional[str] = None
        # Held while a thread builds a key. In a fork child these start afresh (fork_locks.py): the
        # child builds or loads the kernel a parent thread was building; the disk layer's file
        # lock still makes it wait for a parent writing the same entry, which appears by rename.
        self._key_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        renew_after_fork(self, "_key_locks", "_locks_lock")

    def _key_lock(self, key: str) -> threading.Lock:
        with self._locks_lock:
            lock = self._key_locks.get(key)
            if lock is None:
                lock = self._key_locks[key] = threading.Lock()
            return lock

    def usable_disk(self) -> Optional[DiskCache]:
        """The disk layer, or None when the directory cannot be created or written (warned once).

        Raises :class:`CacheError` when the directory is one other users can write to.
        """
        if self._disk_error is not None:
            return None
        try:
            self.disk.prepare()
        except CacheError:
            raise
        except OSError as exc:
            self._disk_error = str(exc)
            if isinstance(exc, ownership.ForeignDirectoryError):
                why = f"{exc} (until then, kernels are cached in memory only)"
            else:
                why = (f"kernel cache directory {self.root} is not usable ({exc}); kernels are cached in memory only. "
                       f"Set TILELANG_CACHE_DIR to a writable directory"
                       + (" on another file system" if isinstance(exc, NoexecCacheDirectory) else ""))
            warn(
                why,
                CacheWarning,
            )
            return None
        return self.disk

    def get_or_build(self, key: str, record: "BackendRecord", build: Callable[[], "JITKernel"]) -> "JITKernel":
        """The kernel for ``key``: from memory, else from disk, else ``build()`` (and saved).

        Threads of this process and other processes asking for one key build it once: the
        first holds a per-key lock (a thread lock and an fcntl file lock) while the others wait
        and then load what it saved.
        """
        kernel = self.memory.get(key)
        if kernel is not None:
            return kernel
        with self._key_lock(key):
            kernel = self.memory.get(key)
            if kernel is not None:
                return kernel
            disk = None
            if record.implements("tilelang_backend_save") and record.implements("tilelang_backend_load"):
                disk = self.usable_disk()
            if disk is None:
                kernel = build()
            else:
                kernel = disk.load(key, record)
                if kernel is None:
                    with disk.lock(key):
                        kernel = disk.load(key, record)
                        if kernel is None:
                            kernel = build()
                            disk.save(key, kernel, record)
            kernel.cache_key = key
            self.memory.put(key, kernel)
            return kernel

    def clear(self) -> int:
        """Empty the memory layer and remove every disk entry; returns how many disk entries went.

        What could not be removed is said in one :class:`CacheWarning` (:meth:`clear_report` lists
        it), and so is a file kept where the cache keeps ``kernels/`` or ``locks/`` (compiles fail
        until it is moved).
        """
        report = self.clear_report()
        warn_failed(report, "clear")
        warn_blocked(report, self.root)
        return report["entries"]

    def clear_report(self) -> dict[str, Any]:
        """:meth:`clear`, returning what :meth:`DiskCache.clear` reports.

        Raises :class:`CacheError` (and removes nothing) when the cache directory itself is one
        others could write to, or not the cache's own (a user's folder named by mistake).
        """
        self.memory.clear()
        if not _is_dir(self.root):
            return {"entries": 0, "tuning_records": 0, "removed_junk": [], "kept": [], "in_use": [], "failed": []}
        check_private(self.root)
        return self.disk.clear()

    def prune(self, older_than_days: float) -> dict[str, int]:
        """:meth:`prune_report`'s counts of removed entries, per reason (``unused``,
        ``not_installed``, ``unreadable``); what could not be removed is said in one :class:`CacheWarning`."""
        report = self.prune_report(older_than_days)
        warn_failed(report, "prune")
        return {why: report[why] for why in PRUNE_REASONS}

    def prune_report(self, older_than_days: float) -> dict[str, Any]:
        """:meth:`DiskCache.prune` (the memory layer is kept: what this process holds stays usable).

        Raises :class:`CacheError` (and removes nothing) when the directory is one others could
        write to, or not the cache's own.
        """
        if not _is_dir(self.root):
            return {**{why: 0 for why in PRUNE_REASONS}, "other_core_kept": 0, "failed": []}
        check_private(self.root)
        return self.disk.prune(older_than_days)

    def info(self) -> dict[str, Any]:
        """Location, number of entries, size per backend, and junk (for ``tilelang cache info``).

        Each backend's row counts its entries, their bytes, and how many of them hold source
        that loading compiles again (``compiled_at_load``: the backend declares
        ``compiles_at_load``, so a disk hit saves the lowering but not that compile), and names
        the backend distribution's installed version (``installed``: None when it is not
        installed; entries of another version are never loaded). Entries another tilelang-core
        wrote (another format version, or metadata fields this one does not know) have rows of
        their own, ``(written by tilelang-core 0.2.0, format 2)``, marked ``"other_core": true``: they
        are not corrupt, and prune removes them only when unused. Entries whose metadata cannot be
        read at all (corrupt) are the row ``(unreadable)``.
        """
        per_backend: dict[str, dict[str, Any]] = {}
        total = 0
        exists = _is_dir(self.root)  # one stat: the answer is the same for every use below
        entries = self.disk.survey() if exists else []
        junk = self.disk.scan()[1] if exists else []
        for directory, meta, writer in entries:
            size = _dir_size(directory)
            total += size
            if meta is not None:
                name = f"{meta.backend.name} {meta.backend.version}"
            else:
                name = f"(written by {writer})" if writer else "(unreadable)"
            row = per_backend.get(name)
            if row is None:
                row = per_backend[name] = {"entries": 0, "bytes": 0, "compiled_at_load": 0,
                                           "installed": _installed_version(meta.backend) if meta else None}
                if writer is not None:
                    row["other_core"] = True
            row["entries"] += 1
            row["bytes"] += size
            row["compiled_at_load"] += bool(meta and meta.compiled_at_load)
        return {
            "location": str(self.root),
            "exists": exists,
            "not_a_cache": ownership.foreign_reason(self.root) if exists else ownership.not_a_directory(self.root),
            "disabled": cache_disabled(),
            "entries": len(entries),
            "bytes": total,
            "backends": per_backend,
            "memory_entries": len(self.memory),
            "junk": [{"path": str(path), "kind": kind} for path, kind in junk],
            "problems": self.disk.subdir_problems() if exists else [],
        }


#: The reasons :meth:`KernelCache.prune` counts removed entries under.
PRUNE_REASONS = ("unused", "not_installed", "unreadable")


def warn_blocked(report: dict[str, Any], root: Path) -> None:
    """A :class:`CacheWarning` when a clear ``report`` kept a file of someone's where the cache
    keeps one of its folders (``kernels``, ``locks``): compiles fail until it is moved, though
    the clear itself went well."""
    blocking = [path for path in report["kept"] if Path(path).parent == root and Path(path).name in _SUBDIRS]
    if blocking:
        warn(f"cleared, but kept {', '.join(blocking)} (the cache did not make it), so the cache cannot be "
             f"used until it is moved or deleted", CacheWarning)


def warn_failed(report: dict[str, Any], command: str) -> None:
    """One :class:`CacheWarning` listing what a clear or prune ``report`` could not remove, if anything."""
    failed = report.get("failed") or []
    if failed:
        shown = "; ".join(item["error"] for item in failed[:5])
        if len(failed) > 5:
            shown += f"; and {len(failed) - 5} more"
        warn(f"kernel cache {command}: {len(failed)} item{'s' if len(failed) != 1 else ''} could not be "
             f"removed ({shown}); make the folders writable and {command} again", CacheWarning)


def _installed_version(backend: Any) -> Optional[str]:
    """The installed version of the distribution of an entry's backend (``BackendRef``), or None
    when it is not installed (an entry that names no distribution: its own version)."""
    from importlib import metadata

    if not backend.distribution:
        return backend.version
    try:
        return metadata.version(backend.distribution)
    except (metadata.PackageNotFoundError, ValueError):
        return None


_caches: dict[str, KernelCache] = {}
_caches_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_caches_lock")


def get_cache(directory: Optional[os.PathLike] = None) -> KernelCache:
    """The :class:`KernelCache` of ``directory`` (default: ``$TILELANG_CACHE_DIR`` or the user cache)."""
    path = str(directory if directory is not None else default_cache_dir())
    cache = _caches.get(path)
    if cache is None:
        with _caches_lock:
            cache = _caches.get(path)
            if cache is None:
                cache = _caches[path] = KernelCache(Path(path))
    return cache


def active_cache() -> Optional[KernelCache]:
    """The cache ``tilelang.compile`` uses now, or None when ``TILELANG_DISABLE_CACHE`` is set."""
    if cache_disabled():
        return None
    return get_cache()


__all__ = ["CacheWarning", "DiskCache", "KernelCache", "MemoryCache", "active_cache", "get_cache"]
