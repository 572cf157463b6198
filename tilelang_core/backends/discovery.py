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

    def load(self) -> Any:
        """Import the plugin object (module) the entry point names."""
        return self.entry_point.load()


def discover(group: str = ENTRY_POINT_GROUP, path: Optional[list[str]] = None) -> list[BackendEntryPoint]:
    """Every entry point of ``group``, deduplicated by (name, distribution), sorted by name.

    ``path`` restricts the search to distributions installed in those directories (default:
    ``sys.path``). The same distribution can be visible twice (an editable install next to a
    path entry); that is one plugin, not a name conflict.
    """
    import importlib_metadata

    if path is None:
        eps = importlib_metadata.entry_points(group=group)
    else:
        eps = [ep for dist in importlib_metadata.distributions(path=path) for ep in dist.entry_points if ep.group == group]
    found: dict[tuple[str, Optional[str]], BackendEntryPoint] = {}
    for ep in eps:
        dist = getattr(ep, "dist", None)
        dist_name = _canonical(dist.metadata["Name"]) if dist is not None else None
        version = dist.version if dist is not None else None
        key = (ep.name, dist_name)
        found.setdefault(key, BackendEntryPoint(ep.name, ep.value, dist_name, version, ep))
    return sorted(found.values(), key=lambda e: (e.name, e.distribution or ""))


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def pip_name_for(backend_name: str) -> str:
    """The distribution name a backend conventionally ships as (``tilelang-backend-<name>``)."""
    return "tilelang-backend-" + backend_name.replace("_", "")
