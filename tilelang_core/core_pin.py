"""Whether an installed plugin distribution accepts this tilelang-core (its ``tilelang-core`` pin).

Each plugin pins the core versions it was written for (``tilelang-core>=0.1,<0.2`` in its
``pyproject.toml``). pip refuses to install a mismatch; one that got in anyway (``--no-deps``, a
core upgraded afterwards, an editable checkout) makes the registry list the plugin as
*incompatible*, with this reason, instead of calling hooks written for another core.
"""

from __future__ import annotations

from typing import Any, Optional

CORE_DISTRIBUTION = "tilelang-core"


def core_pin_problem(entry_point: Any) -> Optional[str]:
    """Why the distribution of ``entry_point`` (an ``importlib_metadata.EntryPoint``) does not
    accept the running core, or None when it does (or declares no pin)."""
    dist = getattr(entry_point, "dist", None)
    requirements = getattr(dist, "requires", None) or []
    if not requirements:
        return None
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from . import __version__

    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != CORE_DISTRIBUTION:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if not requirement.specifier.contains(__version__, prereleases=True):
            name = f"{dist.metadata['Name']} {dist.version}"
            return (
                f"{name} requires {CORE_DISTRIBUTION}{requirement.specifier}, but {CORE_DISTRIBUTION} {__version__} "
                f"is installed"
            )
    return None
