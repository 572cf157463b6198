"""``JITKernel.export(path)`` and ``tilelang.load(path)``: kernels as self-contained directories.

An exported directory has the layout of a cache entry (:mod:`tilelang_core.cache.entry`):
``tilelang-kernel.json`` (versions, backend, build options, file digests), ``artifact.json`` and
``backend/`` (the backend's own files). Loading it neither lowers nor compiles (except for a
backend declaring ``compiles_at_load``, whose load hook compiles the saved source), and this
module imports no TVM: only the backend's load hook runs, and it imports what it needs.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Optional, Union

from ..errors import ArtifactError, BackendNotInstalledError
from ..fork_locks import waits_for_fork
from ..path_limits import path_limits
from ..warning_location import warn
from .export_swap import exchange, recover_leftovers, side_name
from .kernel import BackendInfo, JITKernel


def _record_for(name: str) -> Any:
    from ..backends import get_registry

    return get_registry().get(name)


def export_kernel(kernel: JITKernel, path: Union[str, os.PathLike], *, overwrite: bool = False) -> Path:
    """Write ``kernel`` to the directory ``path``; see :meth:`JITKernel.export`."""
    from ..cache import entry as E

    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"cannot export kernel {kernel.name!r}: path must name the folder to create "
                         f"(a str or os.PathLike such as 'exported/{kernel.name}'), got {path!r}")
    target = Path(path)
    record = _record_for(kernel.backend.name)
    if record is None:
        raise BackendNotInstalledError(
            f"cannot export kernel {kernel.name!r}: its execution backend {kernel.backend.name!r} is no longer installed"
        )
    record.ensure_usable()
    if not (record.implements("tilelang_backend_save") and record.implements("tilelang_backend_load")):
        raise ArtifactError(
            f"execution backend {record.name!r} cannot export kernels: it does not implement the "
            f"tilelang_backend_save and tilelang_backend_load hooks"
        )
    blocker = _file_on_the_way(target.parent)
    if blocker is not None:
        raise NotADirectoryError(
            f"cannot export kernel {kernel.name!r} to {target}: {blocker} is a file, not a folder; choose another path"
        )
    _refuse_long_names(kernel, target)
    recover_leftovers(target, lambda p: _why_not_an_export(p) is None)
    replacing = os.path.lexists(target)
    if replacing:
        if not overwrite:
            raise FileExistsError(f"cannot export kernel {kernel.name!r} to {target}: it exists (pass overwrite=True)")
        _refuse_unless_export(kernel, target)
    made: list[Path] = []
    tmp = side_name(target, "tmp")  # short: a long name still fits
    try:
        _make_parents(target.parent, made)
        tmp.mkdir(mode=0o755)
        try:
            if getattr(kernel, "_export_files", None) is not None:  # unpickled: its files, checked when loaded
                from .pickling import write_files

                write_files(tmp, kernel._export_files)
            else:
                E.write_entry(tmp, kernel.runner, kernel.artifact, kernel.options, record, kind="export")
            _move_into_place(kernel, tmp, target)
        finally:
            if os.path.lexists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        _remove_made(made)
        kept = "the previous export there is unchanged" if replacing else "nothing was left there"
        raise type(exc)(exc.errno, f"cannot export kernel {kernel.name!r} to {target}: {exc.strerror or exc}; "
                        f"{kept}") from exc
    except BaseException:
        _remove_made(made)
        raise
    return target


def _refuse_long_names(kernel: JITKernel, target: Path) -> None:
    """Refuse, before anything is written, a path the file system cannot hold: a name longer than
    it allows (``NAME_MAX``, 255 bytes on most) or a path longer than ``PATH_MAX`` with the
    export's own files under it. Before, the whole export was written beside the path and the
    final rename failed; a path too deep also left the folders made on the way.

    :raises OSError: (``ENAMETOOLONG``) naming the part that is too long and the limit.
    """
    name_max, path_max = path_limits(target)
    absolute = os.path.abspath(target)
    for part in Path(absolute).parts:
        if len(os.fsencode(part)) > name_max:
            shown = part if len(part) <= 40 else part[:40] + "..."
            raise OSError(errno.ENAMETOOLONG, f"cannot export kernel {kernel.name!r} to {target}: the name {shown!r} "
                          f"is {len(os.fsencode(part))} bytes long, and this file system allows {name_max}; choose a "
                          f"shorter name")
    room = 96  # the longest path the export writes under it: backend/<file>, the hidden side names
    if len(os.fsencode(absolute)) + room > path_max:
        raise OSError(errno.ENAMETOOLONG, f"cannot export kernel {kernel.name!r} to {target}: the path is "
                      f"{len(os.fsencode(absolute))} bytes long, and the files under it would pass the system's limit "
                      f"of {path_max} bytes for a path; choose a shorter path")


def _remove_made(made: list[Path]) -> None:
    """Remove the folders :func:`_make_parents` made for a failed export (innermost first, only
    while empty: never anything someone put there meanwhile)."""
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _why_not_an_export(target: Path) -> Optional[str]:
    """None when ``target`` is a previous export (and nothing else); else why it is not."""
    from ..cache import entry as E
    from ..cache.trust import describe_kind

    st = os.lstat(target)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"it is {describe_kind(st)}, not an exported kernel"
    try:
        meta = E.read_meta(target)
    except FileNotFoundError:
        return f"it has no {E.META_FILE}, so it is not an exported kernel"
    except (ArtifactError, OSError, UnicodeDecodeError) as exc:
        return f"its {E.META_FILE} is not valid kernel metadata ({exc})"
    if meta.kind != "export":
        return f"its {E.META_FILE} describes a kernel cache entry, not an export"
    try:
        present = E.scan_tree(target)
    except (ArtifactError, OSError) as exc:
        return f"it holds something an export never does ({exc})"
    present.pop(E.META_FILE, None)
    unlisted = sorted(set(present) - set(meta.files))
    if unlisted:
        shown = ", ".join(unlisted[:5]) + (f" and {len(unlisted) - 5} more" if len(unlisted) > 5 else "")
        return f"it holds files the export did not write ({shown})"
    extra = _folders_not_listed(target, meta.files)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        return f"it holds folders the export did not write ({shown})"
    return None


def _folders_not_listed(target: Path, files: Any) -> list[str]:
    """The folders under ``target`` (relative POSIX paths) that hold none of the listed ``files``:
    an empty folder someone made in an export (overwrite=True removed it with the export)."""
    needed = {"/".join(rel.split("/")[:i]) for rel in files for i in range(1, rel.count("/") + 1)}
    found = []
    for root, dirs, _ in os.walk(target):  # links are not followed (scan_tree refused them before)
        for name in dirs:
            rel = Path(root, name).relative_to(target).as_posix()
            if rel not in needed:
                found.append(rel)
    return sorted(found)


def _missing_ancestors(directory: Path) -> tuple[list[Path], Path]:
    """The folders of ``directory`` (itself included) that do not exist, innermost first, and the
    nearest one that does."""
    missing = []
    current = directory
    while not os.path.lexists(current) and current.parent != current:
        missing.append(current)
        current = current.parent
    return missing, current


def _file_on_the_way(directory: Path) -> Optional[Path]:
    """The nearest existing ancestor of ``directory`` (itself included) when it is not a folder."""
    existing = _missing_ancestors(directory)[1]
    return None if existing.is_dir() else existing


def _make_parents(directory: Path, made: list[Path]) -> None:
    """Create the missing folders of ``directory`` with mode 0755 whatever the umask: under umask
    0002 they were group-writable, and ``tilelang.load`` then refused the export it had just made
    (a folder others can write to on the way to native code, cache/trust.py). Each folder made
    is put at the front of ``made`` (so that a failed export can remove them, innermost first)."""
    missing = _missing_ancestors(directory)[0]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
            made.insert(0, folder)
            os.chmod(folder, 0o755)


def _refuse_unless_export(kernel: JITKernel, target: Path) -> None:
    why = _why_not_an_export(target)
    if why is not None:
        raise ArtifactError(
            f"cannot export kernel {kernel.name!r} to {target} with overwrite=True: {why}. overwrite=True replaces "
            f"only a previous export; remove {target} yourself or choose another path"
        )


def _move_into_place(kernel: JITKernel, tmp: Path, target: Path) -> None:
    """Rename the finished ``tmp`` to ``target``, replacing a previous export there.

    Where the system can, the two are exchanged in one step (jit/export_swap.py), so ``target``
    always holds a whole export; the previous one, now at ``tmp``, is checked again once it can
    no longer change under the check (and swapped back if it is not an export) and removed by
    the caller. Elsewhere the previous export is first moved aside (and checked), then the new
    one is renamed in; if that fails the previous one is put back. The moved-aside copy never
    outlives this call; a killed process's is put back by the next load when ``target`` is
    missing, and removed (or put back) by the next export to ``target``. A load otherwise leaves
    the folders beside the export alone: loading only reads.
    """
    if not os.path.lexists(target):
        os.rename(tmp, target)
        return
    if stat.S_ISDIR(os.lstat(target).st_mode) and exchange(tmp, target):
        why = _why_not_an_export(tmp)
        if why is not None:  # it changed between the first check and the swap: put it back untouched
            exchange(tmp, target)
            raise ArtifactError(
                f"cannot export kernel {kernel.name!r} to {target} with overwrite=True: {why} (it changed while "
                f"exporting); nothing was replaced"
            )
        return
    old = side_name(target, "old")
    os.rename(target, old)
    why = _why_not_an_export(old)
    if why is not None:  # it changed between the first check and the move: put it back untouched
        os.rename(old, target)
        raise ArtifactError(
            f"cannot export kernel {kernel.name!r} to {target} with overwrite=True: {why} (it changed while "
            f"exporting); nothing was replaced"
        )
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    finally:
        if os.path.lexists(old):  # a previous export, checked above
            shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Hold off the cyclic garbage collector while a kernel is loaded.

    Loading imports modules and builds objects that live as long as the kernel, so a collection
    in between finds nothing to free; but with torch imported, the full collection that those
    few thousand allocations trigger scans torch's whole heap (about 0.13 s on the reference
    machine), doubling what a fresh process spends in ``load``. The collection still runs, at
    the next allocations after the kernel is loaded. Reference counting is unaffected.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@waits_for_fork  # a fork waits for it (fork_locks.py)
def load(path: Union[str, os.PathLike], *, trusted: bool = False) -> JITKernel:
    """Restore a kernel written by :meth:`JITKernel.export`, ready to call.

    **This runs native code from** ``path`` (the backend loads the shared library saved there),
    so load only directories whose contents you trust. Unless ``trusted=True``, the directory is
    refused with :class:`~tilelang_core.errors.CacheError` when someone else could have put code
    there: every folder and file of it must belong to you (or root) and be writable by nobody
    else, and no directory on the way to it (nor on the way through a symbolic link) may be
    writable by others without the sticky bit. ``trusted=True`` skips only that ownership check;
    the integrity checks (exactly the listed files, regular files only, sizes and SHA-256, the
    backend's own checks) always run.

    Needs the same execution backend plugin, at the same version, installed here; neither
    lowers nor compiles, and imports TVM only if the backend itself needs it. A backend whose
    target declares ``compiles_at_load`` saved source rather than a binary: its load hook
    compiles that source (where it can run), which is what loading such a kernel costs.

    :param trusted: load even if other users could write to the directory (you vouch for them).
    :raises CacheError: others could have written to the directory (see ``trusted``).
    :raises ArtifactError: the directory is not an exported kernel, is incomplete or corrupt,
        or was made by another version of the backend.
    :raises BackendNotInstalledError: the backend that made it is not installed.
    """
    if not isinstance(trusted, bool):  # "no" or "False" from a config file skipped the ownership check
        raise TypeError(f"tilelang.load: trusted must be True or False, got {trusted!r}")
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise TypeError(f"tilelang.load: path must be the exported kernel's folder, a str or os.PathLike such as "
                        f"'exported/my_kernel', got {type(path).__name__} {path!r:.80}")
    if not os.fspath(path):
        raise ValueError("tilelang.load: path is empty; give the folder kernel.export(path) wrote")
    with _cyclic_gc_paused():
        return _load(Path(path), trusted=trusted)


def _export_place(directory: Path) -> Any:
    from ..cache.trust import Place

    trust_it = f"tilelang.load({str(directory)!r}, trusted=True)"
    return Place(
        what="exported kernel",
        consequence="tilelang.load runs the native code in it, so whoever can write there could make this process "
        "run their code",
        fix_mode=f"Run `chmod -R go-w {directory}` if only you should write there; if you trust everyone who can, "
        f"load it with {trust_it}",
        fix_other=f"Copy the kernel to a directory of your own, or, if you trust whoever owns it, load it with "
        f"{trust_it}",
        fix_path=f"Move the kernel to a directory only you can write to, or, if you trust everyone who can write on "
        f"the way there, load it with {trust_it}",
    )


def _load(directory: Path, *, trusted: bool = False) -> JITKernel:
    check = None
    if not os.path.lexists(directory) and recover_leftovers(directory, lambda p: _why_not_an_export(p) is None,
                                                            remove_others=False):  # a load only reads

        warn(f"{directory} was missing: an export into it was interrupted; the previous export was put back")
    from ..cache.location import link_problem

    problem = link_problem(directory)  # a link loop or a dangling link: no trust question to ask
    if problem is not None:
        raise ArtifactError(f"{directory} is not an exported tilelang kernel: {problem}")
    if not trusted:
        from ..cache import trust

        place = _export_place(directory)
        trust.check_path(directory, place)
        check = trust.checker(place)
    replaced = f"{directory} was replaced by another export each of the {LOAD_ATTEMPTS} times it was being loaded; " \
               "load it again once the exports into it have finished"
    for attempt in range(1, LOAD_ATTEMPTS + 1):
        before = _export_signature(directory)
        try:
            kernel = _load_once(directory, check)
        except (ArtifactError, OSError) as exc:
            if _export_signature(directory) == before:
                raise  # the export itself is wrong
            if attempt == LOAD_ATTEMPTS:
                raise ArtifactError(f"{replaced} (the last try: {exc})") from exc
            continue  # another export replaced it while it was read: read the new one
        if _export_signature(directory) == before:
            return kernel
    raise ArtifactError(replaced)


#: How many times :func:`tilelang.load` reads an export that another process keeps replacing.
LOAD_ATTEMPTS = 5


def _export_signature(directory: Path) -> Any:
    """What changes when an export replaces the one at ``directory`` (a new folder and metadata
    file; the folder's inode alone may be reused): None where it cannot be read."""
    from ..cache import entry as E

    try:
        folder, meta = os.stat(directory), os.stat(directory / E.META_FILE)
    except OSError:
        return None
    return folder.st_dev, folder.st_ino, folder.st_ctime_ns, meta.st_ino, meta.st_mtime_ns, meta.st_size


def _load_once(directory: Path, check: Any) -> JITKernel:
    """Read, verify and load the export at ``directory`` once. :func:`_load` compares the export's
    signature before and after: the files are read by path, several times (the core hashes them,
    the backend reads them again, a backend may open its library twice), so an export that
    replaced it in between made one kernel of two exports' files; cython and ctypes then ran one
    kernel's library with the other's call plan and the process aborted ("corrupted size vs.
    prev_size"), while docs/jit.md promises a whole export, the previous one or the new one."""
    from ..cache import entry as E
    from ..hookspecs import PLUGIN_API_VERSION

    try:
        meta = E.read_meta(directory, check=check)
    except (FileNotFoundError, NotADirectoryError):
        raise ArtifactError(
            f"{directory} is not an exported tilelang kernel (no {E.META_FILE}); create one with kernel.export(path)"
        ) from None
    except UnicodeDecodeError:
        raise ArtifactError(f"{directory / E.META_FILE} is not valid kernel metadata (not text)") from None
    wanted = meta.backend
    dist = wanted.distribution or f"tilelang-backend-{wanted.name.replace('_', '')}"
    record = _record_for(wanted.name)
    if record is None:
        raise BackendNotInstalledError(
            f"kernel {meta.name!r} in {directory} was exported by execution backend {wanted.name!r} "
            f"({dist} {wanted.version}), which is not installed; install it with: pip install {dist}=={wanted.version}"
        )
    record.ensure_usable()
    if (record.version or "0") != wanted.version:
        raise ArtifactError(
            f"kernel {meta.name!r} in {directory} was exported by {dist} {wanted.version}, but {record.distribution} "
            f"{record.version} is installed; install {dist}=={wanted.version} or export the kernel again"
        )
    if wanted.plugin_api_version != PLUGIN_API_VERSION:
        raise ArtifactError(
            f"kernel {meta.name!r} in {directory} was exported for plugin API {wanted.plugin_api_version}; this "
            f"tilelang-core provides {PLUGIN_API_VERSION}; export it again"
        )
    try:
        E.verify_files(directory, meta, check=check)
    except FileNotFoundError as exc:
        raise ArtifactError(f"exported kernel {directory} is incomplete: {exc.filename} is missing") from None
    artifact = E.read_artifact(directory, meta)
    runner = E.load_runner(directory, meta, artifact, record)
    return JITKernel.create(runner, artifact, BackendInfo(record.name, record.version or "0"), meta.options)
