"""The on-disk layout of one saved kernel, shared by cache entries and exported kernels.

::

    <entry>/
      tilelang-kernel.json   metadata (EntryMeta): versions, backend, build options, file digests
      artifact.json          the KernelArtifact (JSON, no TVM objects)
      backend/               whatever the backend's tilelang_backend_save hook wrote

The metadata is written last and lists the size and SHA-256 of every other file, so a
truncated, half-written or tampered entry is detected before the backend is asked to load it:
the entry must hold exactly the listed files, each a regular file read without following links
(:mod:`tilelang_core.cache.files`), so the backend never reads a file nobody verified.
Nothing is pickled: every file the core reads is JSON validated by pydantic
(:mod:`tilelang_core.schema`).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from annotated_types import Ge
from pydantic_core import ValidationError

from .. import schema
from ..artifact import BuildOptions, KernelArtifact
from ..errors import ArtifactError
from .files import read_regular, sha256_regular
from .trust import Check, describe_kind

if TYPE_CHECKING:
    from ..backends.registry import BackendRecord

#: Version of this layout; an entry of another version is rebuilt (cache) or refused (load).
ENTRY_FORMAT_VERSION = 1
META_FILE = "tilelang-kernel.json"
ARTIFACT_FILE = "artifact.json"
BACKEND_DIR = "backend"

_STRICT = {"extra": "forbid", "use_attribute_docstrings": True}


class _ExactType:
    """Annotation marker: pydantic validates the field strictly, so a value of another JSON type is
    an error ("1" or 1.0 for 1), not converted. The metadata is written only by this code, so such
    a value is damage. (pydantic calls this hook when it builds the schema, kept in the snapshot;
    nothing imports pydantic for it.)"""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema["strict"] = True
        return schema


_EXACT = _ExactType()
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(kw_only=True, frozen=True)
class FileDigest:
    """Size and SHA-256 of one file of an entry."""

    __pydantic_config__ = _STRICT

    size: Annotated[int, Ge(0), _EXACT]
    sha256: str
    """Lowercase hex digest."""

    def __post_init__(self) -> None:
        if not _SHA256.fullmatch(self.sha256):
            raise ValueError(f"field 'sha256': must be 64 lowercase hex digits, got {self.sha256!r}")


_BACKEND_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_DIST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")


@dataclass(kw_only=True, frozen=True)
class BackendRef:
    """The backend that built (and can load) a saved kernel."""

    __pydantic_config__ = _STRICT

    name: str
    distribution: Optional[str] = None
    version: str
    plugin_api_version: Annotated[int, _EXACT]

    def __post_init__(self) -> None:
        # these reach messages such as "install it with: pip install <distribution>==<version>":
        # only what a backend's real names and versions look like (PEP 508 names, PEP 440 versions)
        for field, value, pattern in (("name", self.name, _BACKEND_NAME), ("distribution", self.distribution, _DIST_NAME),
                                      ("version", self.version, _VERSION)):
            if value is not None and not pattern.fullmatch(value):
                raise ValueError(f"field 'backend.{field}': not a valid {field}, got {value!r}")


@dataclass(kw_only=True, frozen=True)
class EntryMeta:
    """Contents of ``tilelang-kernel.json``."""

    __pydantic_config__ = _STRICT

    format: Literal["tilelang-kernel"] = "tilelang-kernel"
    format_version: Annotated[int, _EXACT]
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
    compiled_at_load: bool = False
    """The backend saved source and a launch plan, not a binary: loading this entry compiles it (its target declares ``compiles_at_load``)."""


#: Most bytes ``tilelang-kernel.json`` may hold (it lists the files; kilobytes in practice).
META_LIMIT = 4 << 20


def scan_tree(root: Path, *, check: Optional[Check] = None) -> dict[str, os.stat_result]:
    """Every regular file under ``root`` by relative POSIX path, found without following links.

    ``check`` (if given) is called on ``root`` and on every directory and file found.

    :raises ArtifactError: the tree holds a symbolic link, a FIFO, a device or a socket.
    """
    found: dict[str, os.stat_result] = {}
    if check is not None:
        check(root, os.lstat(root))
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
        for child in children:
            st = child.stat(follow_symlinks=False)
            rel = prefix + child.name
            path = Path(child.path)
            if stat.S_ISDIR(st.st_mode):
                if check is not None:
                    check(path, st)
                stack.append((path, rel + "/"))
            elif stat.S_ISREG(st.st_mode):
                if check is not None:
                    check(path, st)
                found[rel] = st
            else:
                raise ArtifactError(
                    f"{path} is {describe_kind(st)}; a saved kernel holds plain files and directories only"
                )
    return found


def _private_modes(root: Path, files: dict[str, os.stat_result]) -> None:
    """Clear group/other write bits on what was just written (the load check refuses them)."""
    for rel, st in files.items():
        if stat.S_IMODE(st.st_mode) & 0o022:
            os.chmod(root / rel, stat.S_IMODE(st.st_mode) & ~0o022)
    for dirpath, _, _ in os.walk(root):
        mode = stat.S_IMODE(os.lstat(dirpath).st_mode)
        if mode & 0o022:
            os.chmod(dirpath, mode & ~0o022)


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
    found = scan_tree(directory)
    _private_modes(directory, found)
    files = {
        rel: FileDigest(size=st.st_size, sha256=sha256_regular(directory / rel, size=st.st_size))
        for rel, st in sorted(found.items())
    }
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
        compiled_at_load=_compiles_at_load(record, artifact),
    )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(directory / META_FILE, flags, 0o644), "w") as f:  # no group/other write, whatever the umask
        f.write(schema.to_json(meta, indent=1))
    return meta


def _compiles_at_load(record: "BackendRecord", artifact: KernelArtifact) -> bool:
    """Whether ``record`` declares that loading its kernels for the artifact's target compiles them."""
    from ..backends.selection import declared_kind

    spec = record.spec
    kind = declared_kind(record, artifact.target_kind) if spec is not None else None
    return bool(kind is not None and spec.targets[kind].compiles_at_load)


class ForeignEntryError(ArtifactError):
    """A saved kernel written by another tilelang-core: another format version, or metadata fields
    this one does not know (a newer core sharing the cache directory). Not corrupt: that core can
    load it, this one cannot."""

    def __init__(self, message: str, *, format_version: int, core_version: Optional[str]) -> None:
        super().__init__(message)
        self.format_version = format_version
        self.core_version = core_version

    @property
    def writer(self) -> str:
        """Who wrote it, for a listing: ``tilelang-core 0.2.0, format 2``."""
        core = f"tilelang-core {self.core_version}" if self.core_version else "another tilelang-core"
        return f"{core}, format {self.format_version}"


def read_meta(directory: Path, *, check: Optional[Check] = None) -> EntryMeta:
    """Read and validate ``tilelang-kernel.json``; raises ArtifactError (FileNotFoundError if absent).

    The file is read without following links and must be a regular file (a FIFO put there
    cannot make this wait); ``check`` judges who may have written it. Metadata of another format
    version, or with fields this core does not know, raises :class:`ForeignEntryError` (an
    ``ArtifactError``): another tilelang-core wrote it.
    """
    data = read_regular(directory / META_FILE, limit=META_LIMIT, check=check)
    try:
        meta = schema.validate_json(EntryMeta, data)
    except ValidationError as exc:
        foreign = _foreign_meta(directory, data, exc)
        if foreign is not None:
            raise foreign from None
        raise ArtifactError(f"{directory / META_FILE} is not valid kernel metadata: {schema.error_summary(exc)}") from None
    if meta.format_version != ENTRY_FORMAT_VERSION:
        raise _other_format(directory, meta.format_version, meta.core_version)
    return meta


def _other_format(directory: Path, format_version: int, core_version: Optional[str]) -> ForeignEntryError:
    """The error for ``directory``'s kernel, saved in another entry format (by ``core_version``, if known)."""
    from .. import __version__

    by = f" by tilelang-core {core_version}" if core_version else ""
    return ForeignEntryError(
        f"{directory} holds a kernel saved in format {format_version}{by}; this tilelang-core ({__version__}) reads "
        f"format {ENTRY_FORMAT_VERSION}",
        format_version=format_version, core_version=core_version)


#: pydantic's error types for a field the schema does not have (dataclasses report the second).
_UNKNOWN_FIELD = ("extra_forbidden", "unexpected_keyword_argument")


def _foreign_meta(directory: Path, data: bytes, exc: ValidationError) -> Optional[ForeignEntryError]:
    """A :class:`ForeignEntryError` when metadata that failed validation was written by another
    tilelang-core (its ``format`` is ours and its ``format_version`` another, or the only errors
    are fields this core does not know), else None (corrupt)."""
    import json

    try:
        raw = json.loads(data)
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("format") != "tilelang-kernel":
        return None
    version, core = raw.get("format_version"), raw.get("core_version")
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    core = core if isinstance(core, str) and _VERSION.fullmatch(core) else None
    if version != ENTRY_FORMAT_VERSION:
        return _other_format(directory, version, core)
    errors = exc.errors()
    if not errors or any(e["type"] not in _UNKNOWN_FIELD for e in errors):
        return None
    fields = ", ".join(sorted({".".join(str(p) for p in e["loc"]) for e in errors})[:5])
    return ForeignEntryError(
        f"{directory / META_FILE} was written by {'tilelang-core ' + core if core else 'another tilelang-core'} "
        f"(format {version}): it has fields this tilelang-core does not know ({fields})",
        format_version=version, core_version=core)


def _listed_path_ok(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and "\\" not in rel and all(p not in ("", ".", "..") for p in parts)


def verify_files(directory: Path, meta: EntryMeta, *, check: Optional[Check] = None) -> None:
    """Check that the entry holds exactly the files its metadata lists, each as recorded.

    Nothing unlisted may be present (so a backend never reads a file nobody verified), nothing
    listed may be missing, ``artifact.json`` must be listed, and each file must be a regular
    file of the recorded size and SHA-256. ``check`` judges every directory and file.

    :raises FileNotFoundError: a listed file is missing (the entry may have vanished).
    :raises ArtifactError: anything else that does not match.
    """
    for rel in meta.files:
        if not _listed_path_ok(rel):
            raise ArtifactError(f"{directory}: metadata lists a path outside the entry: {rel!r}")
    if ARTIFACT_FILE not in meta.files:
        raise ArtifactError(f"{directory / META_FILE} does not list {ARTIFACT_FILE}; the saved kernel is incomplete")
    present = scan_tree(directory, check=check)
    present.pop(META_FILE, None)
    unlisted = sorted(set(present) - set(meta.files))
    if unlisted:
        shown = ", ".join(unlisted[:5]) + (f" and {len(unlisted) - 5} more" if len(unlisted) > 5 else "")
        raise ArtifactError(
            f"{directory} holds files its metadata does not list ({shown}); they were not written with the kernel"
        )
    for rel in sorted(meta.files):
        if rel not in present:
            path = directory / rel
            raise FileNotFoundError(errno.ENOENT, f"{path} is listed in the metadata but missing", str(path))
    for rel, digest in sorted(meta.files.items()):
        path = directory / rel
        if present[rel].st_size != digest.size:
            raise ArtifactError(
                f"{path} is truncated or changed ({present[rel].st_size} bytes, expected {digest.size})"
            )
        if sha256_regular(path, size=digest.size, check=check) != digest.sha256:
            raise ArtifactError(f"{path} is corrupt (its SHA-256 does not match the metadata)")


def read_artifact(directory: Path, meta: Optional[EntryMeta] = None) -> KernelArtifact:
    """The artifact saved in ``directory`` (read up to the size ``meta`` records)."""
    limit = meta.files[ARTIFACT_FILE].size if meta is not None and ARTIFACT_FILE in meta.files else 1 << 30
    data = read_regular(directory / ARTIFACT_FILE, limit=limit)
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:  # a bare UnicodeDecodeError reached tilelang.load's caller
        raise ArtifactError(f"{directory / ARTIFACT_FILE} is not a kernel artifact (not UTF-8 text: {exc})") from None
    return KernelArtifact.from_json(text)


def load_runner(directory: Path, meta: EntryMeta, artifact: KernelArtifact, record: "BackendRecord") -> Any:
    """Ask the backend to restore the kernel from ``directory/backend``."""
    runner = record.call("tilelang_backend_load", artifact=artifact, directory=directory / BACKEND_DIR, options=meta.options)
    if runner is None or not callable(runner):
        raise ArtifactError(
            f"execution backend {record.name!r} returned {type(runner).__name__} from tilelang_backend_load for "
            f"{directory}, not a callable kernel"
        )
    return runner
