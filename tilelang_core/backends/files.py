"""The content hash of a backend plugin's code, part of the kernel cache key.

The hash must say which code builds and loads a backend's kernels, and be the same in every
process that runs the same code, whichever copy of the plugin each imports. Two copies are common
while a backend is developed: the installed one, and the project folder's source tree, which
shadows it when a command runs in that folder with the folder on ``sys.path`` (``python -m``,
``python -m pytest``). A conformance check or a kernel cache shared between such a process and
one started elsewhere must then agree whenever the two copies are identical.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from typing import Any, Optional


def plugin_files_hash(dist: Any, package: str) -> str:
    """Content hash (hex) of a backend plugin's code: the package it runs from, and the rest of its
    installed distribution. Cheap; the registry computes it once per record.

    :param dist: the ``importlib.metadata`` distribution the plugin's entry point came from (or None).
    :param package: the top-level package (or module) of its entry-point module.

    - The plugin package is hashed *as imported*: every file of the directory Python imported it
      from (``sys.modules[package].__path__``, else where it would be imported from), by its path
      inside the package and the sha256 of its content, byte-code caches left out. Whether that
      directory is the installed copy, a source tree that shadows it or the source of an editable
      install (whose ``RECORD`` lists only a ``.pth`` file), identical files give an identical hash,
      and an edited build hook a new one even at the same version. Where the imported file is the
      one pip installed (the ``RECORD`` locates it there, with the same size) the recorded sha256 is
      used instead of reading the file: the same value, without the read.
    - The distribution's other files (other modules, data, its ``.dist-info``) are hashed from the
      ``RECORD`` digests, or read where it has none. They are taken from the *installed*
      distribution: when the one found first has no ``RECORD`` (the ``.egg-info`` setuptools leaves
      in a project folder, found first from that folder), the distribution of the same name that has
      one is used, so that a process started in the project folder hashes what another process sees.
    """
    from ..cache.key import _SKIPPED_SUFFIXES, _file_digest

    installed = _installed_distribution(dist)
    listed = _listed_files(installed)
    where = _imported_location(package)
    entries: list[str] = []
    if where is not None:
        recorded = {os.path.realpath(full): (digest, size) for name, full, digest, size in listed
                    if name == package + ".py" or name.startswith(package + "/")}
        for rel, full in _package_files(where, package, _SKIPPED_SUFFIXES):
            entries.append(f"{rel} sha256={_recorded_sha256(full, recorded) or _file_digest(full)}")
    for name, full, digest, size in listed:
        if where is not None and (name == package + ".py" or name.startswith(package + "/")):
            continue  # hashed as imported, above
        if name.endswith(_SKIPPED_SUFFIXES) or "__pycache__" in name:
            continue
        if digest is not None and size is not None and _size(full) == size:
            entries.append(f"{name} {digest}")
        elif not name.endswith("RECORD"):  # RECORD lists the digests used; it has none of its own
            entries.append(f"{name} sha256={_file_digest(full)}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def _installed_distribution(dist: Any) -> Any:
    """``dist``, or the distribution of the same name that has a ``RECORD`` when ``dist`` has none."""
    if dist is None or _has_record(dist):
        return dist
    try:
        import importlib_metadata

        name = dist.metadata["Name"]
        for other in importlib_metadata.distributions(name=name):
            if _has_record(other):
                return other
    except Exception:  # noqa: BLE001 - unreadable metadata: keep the distribution found first
        pass
    return dist


def _has_record(dist: Any) -> bool:
    try:
        return bool(dist.read_text("RECORD"))
    except Exception:  # noqa: BLE001
        return False


def _listed_files(dist: Any) -> list[tuple[str, str, Optional[str], Optional[int]]]:
    """(name, located path, ``mode=value`` digest or None, size or None) of each file ``dist`` lists."""
    if dist is None:
        return []
    try:
        files = dist.files or ()
    except Exception:  # noqa: BLE001 - unreadable metadata: hash what can be found instead
        return []
    out = []
    for item in sorted(files, key=str):
        try:
            full = str(item.locate())
        except Exception:  # noqa: BLE001
            continue
        recorded = getattr(item, "hash", None)
        size = getattr(item, "size", None)
        digest = f"{recorded.mode}={recorded.value}" if recorded is not None else None
        try:
            size = int(size) if size is not None else None
        except (TypeError, ValueError):
            size = None
        out.append((str(item), full, digest, size))
    return out


def _imported_location(package: str) -> Optional[str]:
    """The directory (a package) or file (a module) ``package`` was imported from, or would be."""
    module = sys.modules.get(package)
    paths = list(getattr(module, "__path__", None) or []) if module is not None else []
    origin = getattr(module, "__file__", None) if module is not None else None
    if module is None:
        import importlib.util

        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return None
        paths = list(spec.submodule_search_locations or [])
        origin = spec.origin if spec.has_location else None
    if paths:
        return os.path.realpath(paths[0])
    return os.path.realpath(origin) if origin else None


def _package_files(where: str, package: str, skipped: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name as RECORD spells it, path) of every file of the package at ``where``, byte-code left out."""
    from ..cache.key import tree_files

    if os.path.isfile(where):
        return [(os.path.basename(where), where)]
    return [(f"{package}/{rel}", full) for rel, full in tree_files(where, skipped)]


def _recorded_sha256(full: str, recorded: dict) -> Optional[str]:
    """The hex sha256 the ``RECORD`` gives for the file at ``full`` when its size still matches, else None."""
    digest, size = recorded.get(os.path.realpath(full), (None, None))
    if digest is None or size is None or _size(full) != size:
        return None
    mode, _, value = digest.partition("=")
    if mode != "sha256":
        return None
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    except (ValueError, TypeError):
        return None


def _size(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_size
    except OSError:
        return None
