"""The on-disk layout of one saved kernel, shared by cache entries and exported kernels.

::

    <entry>/
      tilelang-kernel.json   metadata (EntryMeta): versions, backend, build options, file digests
      artifact.json          the KernelArtifact (JSON, no TVM objects)
      backend/               whatever the backend's tilelang_backend_save hook wrote

The metadata is written last and lists the size and SHA-256 of every other file, so a
truncated, half-written or tampered entry is detected before the backend is asked to load it.
Nothing is pickled: every file the core reads is JSON validated by pydantic
(:mod:`tilelang_core.schema`).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from annotated_types import Ge
from pydantic_core import ValidationError

from .. import schema
from ..artifact import BuildOptions, KernelArtifact
from ..errors import ArtifactError

if TYPE_CHECKING:
    from ..backends.registry import BackendRecord

#: Version of this layout; an entry of another version is rebuilt (cache) or refused (load).
ENTRY_FORMAT_VERSION = 1
META_FILE = "tilelang-kernel.json"
ARTIFACT_FILE = "artifact.json"
BACKEND_DIR = "backend"

_STRICT = {"extra": "forbid", "use_attribute_docstrings": True}
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(kw_only=True, frozen=True)
class FileDigest:
    """Size and SHA-256 of one file of an entry."""

    __pydantic_config__ = _STRICT

    size: Annotated[int, Ge(0)]
    sha256: str
    """Lowercase hex digest."""

    def __post_init__(self) -> None:
        if not _SHA256.fullmatch(self.sha256):
            raise ValueError(f"field 'sha256': must be 64 lowercase hex digits, got {self.sha256!r}")


@dataclass(kw_only=True, frozen=True)
class BackendRef:
    """The backend that built (and can load) a saved kernel."""

    __pydantic_config__ = _STRICT

    name: str
    distribution: Optional[str] = None
    version: str
    plugin_api_version: int


@dataclass(kw_only=True, frozen=True)
class EntryMeta:
    """Contents of ``tilelang-kernel.json``."""

    __pydantic_config__ = _STRICT

    format: Literal["tilelang-kernel"] = "tilelang-kernel"
    format_version: int
    kind: Literal["cache", "export"]
    core_version: str
    key: Optional[str] = None
    """Cache key (cache entries only)."""
    name: str
    backend: BackendRef
    options: BuildOptions
    files: dict[str, FileDigest]
    """Every file but this one, by path relative to the entry."""
    created: float


def _digest(path: Path) -> FileDigest:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            size += len(chunk)
            h.update(chunk)
    return FileDigest(size=size, sha256=h.hexdigest())


def _walk_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                raise ArtifactError(f"backend wrote a symbolic link {p.relative_to(root)}; entries must hold plain files")
            out.append(p)
    return out


def write_entry(
    directory: Path,
    runner: Any,
    artifact: KernelArtifact,
    options: BuildOptions,
    record: "BackendRecord",
    *,
    kind: Literal["cache", "export"],
    key: Optional[str] = None,
) -> EntryMeta:
    """Fill the existing, empty ``directory`` with a saved kernel (backend files first, metadata last)."""
    from .. import __version__, hookspecs

    backend_dir = directory / BACKEND_DIR
    backend_dir.mkdir(mode=0o700)
    record.call("tilelang_backend_save", kernel=runner, directory=backend_dir)
    (directory / ARTIFACT_FILE).write_text(artifact.to_json())
    files = {str(p.relative_to(directory).as_posix()): _digest(p) for p in _walk_files(directory)}
    meta = EntryMeta(
        format_version=ENTRY_FORMAT_VERSION,
        kind=kind,
        core_version=__version__,
        key=key,
        name=artifact.name,
        backend=BackendRef(
            name=record.name,
            distribution=record.distribution,
            version=record.version or "0",
            plugin_api_version=hookspecs.PLUGIN_API_VERSION,
        ),
        options=options,
        files=files,
        created=time.time(),
    )
    (directory / META_FILE).write_text(schema.to_json(meta, indent=1))
    return meta


def read_meta(directory: Path) -> EntryMeta:
    """Read and validate ``tilelang-kernel.json``; raises ArtifactError (FileNotFoundError if absent)."""
    text = (directory / META_FILE).read_text()
    try:
        meta = schema.validate_json(EntryMeta, text)
    except ValidationError as exc:
        raise ArtifactError(f"{directory / META_FILE} is not valid kernel metadata: {schema.error_summary(exc)}") from None
    if meta.format_version != ENTRY_FORMAT_VERSION:
        raise ArtifactError(
            f"{directory} holds a kernel saved in format {meta.format_version}; this tilelang-core reads format "
            f"{ENTRY_FORMAT_VERSION}"
        )
    return meta


def verify_files(directory: Path, meta: EntryMeta) -> None:
    """Check that every listed file exists with its recorded size and digest."""
    for rel, digest in meta.files.items():
        path = directory / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ArtifactError(f"{directory}: metadata lists a path outside the entry: {rel!r}")
        size = os.stat(path).st_size  # FileNotFoundError: the entry vanished
        if size != digest.size:
            raise ArtifactError(f"{path} is truncated or changed ({size} bytes, expected {digest.size})")
        if _digest(path).sha256 != digest.sha256:
            raise ArtifactError(f"{path} is corrupt (its SHA-256 does not match the metadata)")


def read_artifact(directory: Path) -> KernelArtifact:
    """The artifact saved in ``directory``."""
    return KernelArtifact.from_json((directory / ARTIFACT_FILE).read_text())


def load_runner(directory: Path, meta: EntryMeta, artifact: KernelArtifact, record: "BackendRecord") -> Any:
    """Ask the backend to restore the kernel from ``directory/backend``."""
    runner = record.call("tilelang_backend_load", artifact=artifact, directory=directory / BACKEND_DIR, options=meta.options)
    if runner is None or not callable(runner):
        raise ArtifactError(
            f"execution backend {record.name!r} returned {type(runner).__name__} from tilelang_backend_load for "
            f"{directory}, not a callable kernel"
        )
    return runner
