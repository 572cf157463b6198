"""Pickling a :class:`~tilelang_core.jit.kernel.JITKernel`: its export, carried as bytes.

``pickle.dumps(kernel)`` exports the kernel (:meth:`JITKernel.export`) into a private temporary
directory and takes its files as bytes; ``pickle.loads`` writes them into another private
temporary directory and restores the kernel with :func:`tilelang.load`, which checks every file's
size and SHA-256 against the export's own record and the backend's version. So a kernel travels
to a ``multiprocessing`` worker (or through any pickle) without lowering or compiling again, on
the terms of ``export``/``load``: the same backend at the same version must be installed there,
and a backend without the save/load hooks cannot pickle its kernels (the ``export`` error says so).

Unpickling runs the kernel's native code, as unpickling anything runs code: unpickle only data
you trust. The temporary directory is removed as soon as the kernel is loaded (a load hook never
reads its directory later: ``tilelang_backend_load``), so a worker that is killed leaves nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ArtifactError

#: Name of the export inside the temporary directories (a fixed, short name).
_EXPORT = "kernel"


def kernel_files(kernel: Any) -> dict[str, bytes]:
    """The files of ``kernel``'s export, by path relative to the export (``/``-separated): the
    files it was unpickled from, else a fresh export's (a kernel loaded from a pickle has no
    directory left to export from)."""
    kept = getattr(kernel, "_export_files", None)
    if kept is not None:
        return kept
    with tempfile.TemporaryDirectory(prefix="tilelang-pickle-") as tmp:
        root = kernel.export(Path(tmp) / _EXPORT)
        files = {}
        for folder, _, names in os.walk(root):
            for name in names:
                path = Path(folder) / name
                files[path.relative_to(root).as_posix()] = path.read_bytes()
        return files


def write_files(root: Path, files: dict[str, bytes]) -> None:
    """Write an export's ``files`` (see :func:`kernel_files`) under the existing, empty ``root``.

    :raises ArtifactError: ``files`` is not a mapping of relative paths to bytes, or a path
        leaves ``root`` or cannot be written there.
    """
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, bytes) for k, v in files.items()):
        raise ArtifactError("cannot unpickle a tilelang kernel: the pickle does not hold an export's files")
    for rel, data in files.items():
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise ArtifactError(f"cannot unpickle a tilelang kernel: file name {rel!r} leaves its export")
        path = root.joinpath(*parts)
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
        except (OSError, ValueError) as exc:  # a name twice, as file and folder; a NUL; too long
            raise ArtifactError(f"cannot unpickle a tilelang kernel: its file {rel!r} cannot be written "
                                f"({type(exc).__name__}: {exc})") from None


def kernel_from_files(files: dict[str, bytes], state: dict) -> Any:
    """The kernel the export ``files`` hold (see :func:`kernel_files`), with ``state`` (its
    ``cache_key``) set; what ``pickle.loads`` calls.

    :raises ArtifactError: the files are not a whole, unchanged export, or ``state`` is not one.
    :raises CacheError: the temporary directory is not private (``TMPDIR``).
    :raises BackendNotInstalledError: the backend that made the kernel is not installed here.
    """
    from ..errors import CacheError
    from .export import load

    if not isinstance(state, dict) or not isinstance(state.get("cache_key"), (str, type(None))):
        raise ArtifactError("cannot unpickle a tilelang kernel: the pickle's state is not a kernel's")
    tmp = tempfile.mkdtemp(prefix="tilelang-unpickle-")
    try:
        root = Path(tmp) / _EXPORT
        root.mkdir(mode=0o700)
        write_files(root, files)
        try:
            kernel = load(root)
        except CacheError:
            raise CacheError(
                f"cannot unpickle a tilelang kernel: the temporary directory {tempfile.gettempdir()} is not private "
                "(other users can write to it, or to a folder on the way, without the sticky bit), so they could swap "
                "the kernel's files before its native code is loaded; set TMPDIR to a directory only you can write to"
            ) from None
        except ArtifactError as exc:
            raise ArtifactError(f"cannot unpickle a tilelang kernel: its files are not a whole, unchanged export "
                                f"({exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    kernel.cache_key = state.get("cache_key")
    kernel._export_files = files  # to pickle or export it again: its directory is gone
    return kernel
