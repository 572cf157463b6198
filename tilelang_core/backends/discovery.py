"""Find backend entry points in installed package metadata (imports no plugin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

ENTRY_POINT_GROUP = "tilelang.backends"


@dataclass(frozen=True)
class BackendEntryPoint:
    """One ``tilelang.backends`` entry point, as read from metadata."""

    name: str
    value: str
    distribution: Optional[str]
    version: Optional[str]
    entry_point: Any  # importlib_metadata.EntryPoint
    problem: Optional[str] = None
    """Why the distribution's metadata cannot be read (no METADATA, no ``Name:``), else None; the
    registry lists such a backend as broken with this reason instead of loading it."""

    def load(self) -> Any:
        """Import the plugin object (module) the entry point names."""
        return self.entry_point.load()


def discover(group: str = ENTRY_POINT_GROUP, path: Optional[list[str]] = None) -> list[BackendEntryPoint]:
    """Every entry point of ``group``, deduplicated by (name, distribution), sorted by name.

    ``path`` restricts the search to distributions installed in those directories (default:
    ``sys.path``). The same distribution can be visible twice (an editable install next to a
    path entry); that is one plugin, not a name conflict. A distribution whose metadata cannot be
    read (a damaged ``.dist-info``) is still listed, with :attr:`BackendEntryPoint.problem` set:
    it must not keep other backends from being found.
    """
    import importlib_metadata

    if path is None:
        eps = importlib_metadata.entry_points(group=group)
    else:
        eps = [ep for dist in importlib_metadata.distributions(path=path) for ep in dist.entry_points if ep.group == group]
    found: dict[tuple[str, Optional[str]], BackendEntryPoint] = {}
    for ep in eps:
        dist = getattr(ep, "dist", None)
        dist_name, version, problem = _identity(dist) if dist is not None else (None, None, None)
        key = (ep.name, dist_name if problem is None else f"?{metadata_path(dist)}")
        found.setdefault(key, BackendEntryPoint(ep.name, ep.value, dist_name, version, ep, problem))
    return sorted(found.values(), key=lambda e: (e.name, e.distribution or ""))


def metadata_path(dist: Any) -> str:
    """Where the metadata of ``dist`` lives (its ``.dist-info`` folder), for messages."""
    return str(getattr(dist, "_path", None) or dist)


def _identity(dist: Any) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(canonical name, version, problem) of ``dist``; a damaged one gives (None, None, why)."""
    where = metadata_path(dist)
    try:
        metadata = dist.metadata
        name = metadata.get("Name") if metadata is not None else None
        version = metadata.get("Version") if metadata is not None else None
    except Exception as exc:  # noqa: BLE001 - MetadataNotFound, an unreadable file: the plugin's problem
        if type(exc).__name__ == "MetadataNotFound":
            return None, None, f"its distribution metadata {where} has no METADATA file"
        return None, None, f"its distribution metadata {where} cannot be read ({type(exc).__name__}: {exc})"
    if metadata is None or not isinstance(name, str) or not name.strip():
        return None, None, f"its distribution metadata {where} has no 'Name:' field in METADATA"
    return _canonical(name), version if isinstance(version, str) else None, None


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def pip_name_for(backend_name: str) -> str:
    """The distribution name a backend conventionally ships as (``tilelang-backend-<name>``)."""
    return "tilelang-backend-" + backend_name.replace("_", "")
