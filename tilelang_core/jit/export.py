"""``JITKernel.export(path)`` and ``tilelang.load(path)``: kernels as self-contained directories.

An exported directory has the layout of a cache entry (:mod:`tilelang_core.cache.entry`):
``tilelang-kernel.json`` (versions, backend, build options, file digests), ``artifact.json`` and
``backend/`` (the backend's own files). Loading it neither lowers nor compiles, and this module
imports no TVM: only the backend's load hook runs, and it imports what it needs.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Union

from ..errors import ArtifactError, BackendNotInstalledError
from .kernel import BackendInfo, JITKernel


def _record_for(name: str) -> Any:
    from ..backends import get_registry

    return get_registry().get(name)


def export_kernel(kernel: JITKernel, path: Union[str, os.PathLike], *, overwrite: bool = False) -> Path:
    """Write ``kernel`` to the directory ``path``; see :meth:`JITKernel.export`."""
    from ..cache import entry as E

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
    if target.exists() and not overwrite:
        raise FileExistsError(f"cannot export kernel {kernel.name!r} to {target}: it exists (pass overwrite=True)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(mode=0o755)
    try:
        E.write_entry(tmp, kernel.runner, kernel.artifact, kernel.options, record, kind="export")
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
            shutil.rmtree(old, ignore_errors=True)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


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


def load(path: Union[str, os.PathLike]) -> JITKernel:
    """Restore a kernel written by :meth:`JITKernel.export`, ready to call.

    Needs the same execution backend plugin, at the same version, installed here; neither
    lowers nor compiles, and imports TVM only if the backend itself needs it.

    :raises ArtifactError: the directory is not an exported kernel, is incomplete or corrupt,
        or was made by another version of the backend.
    :raises BackendNotInstalledError: the backend that made it is not installed.
    """
    with _cyclic_gc_paused():
        return _load(Path(path))


def _load(directory: Path) -> JITKernel:
    from ..cache import entry as E
    from ..hookspecs import PLUGIN_API_VERSION

    if not (directory / E.META_FILE).is_file():
        raise ArtifactError(
            f"{directory} is not an exported tilelang kernel (no {E.META_FILE}); create one with kernel.export(path)"
        )
    try:
        meta = E.read_meta(directory)
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
        E.verify_files(directory, meta)
    except FileNotFoundError as exc:
        raise ArtifactError(f"exported kernel {directory} is incomplete: {exc.filename} is missing") from None
    artifact = E.read_artifact(directory)
    runner = E.load_runner(directory, meta, artifact, record)
    return JITKernel.create(runner, artifact, BackendInfo(record.name, record.version or "0"), meta.options)
