"""Missing Python modules as environment problems: say which module, who needs it, what to install.

The install command comes from the needing distribution's own declared requirement (its
``Requires-Dist`` metadata), so a missing ``tvm`` gives ``pip install 'apache-tvm<0.28,>=0.27.0'``
for tilelang-core, and a missing ``torch`` the torch requirement of the backend that needs it.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Optional

from .errors import MissingDependencyError

#: The distribution of this core (whose requirements say what the core itself needs).
CORE_DISTRIBUTION = "tilelang-core"

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_for(module: str, distribution: Optional[str]) -> Optional[str]:
    """The requirement string (``"apache-tvm<0.28,>=0.27.0"``) by which ``distribution`` asks for
    the distribution providing ``module``, or None when it declares none that matches.

    A requirement matches when its project name is the module's name or ends with ``-<module>``
    (``apache-tvm`` provides ``tvm``, ``apache-tvm-ffi`` provides ``tvm_ffi``); requirements of
    extras are ignored.
    """
    if not distribution:
        return None
    import importlib_metadata

    try:
        requires = importlib_metadata.requires(distribution) or []
    except importlib_metadata.PackageNotFoundError:
        return None
    top = _canonical(module.split(".")[0])
    for text in requires:
        requirement, _, marker = text.partition(";")
        if "extra" in marker:
            continue
        match = _NAME.match(requirement)
        if match is None:
            continue
        project = _canonical(match.group(1))
        if project == top or project.endswith("-" + top):
            return requirement.strip().replace(" ", "")
    return None


def install_hint(module: str, distribution: Optional[str]) -> str:
    """``pip install '<requirement>'`` for ``module`` as ``distribution`` declares it (else the module's name)."""
    requirement = requirement_for(module, distribution)
    if requirement is None:
        return f"pip install {module.split('.')[0]}"
    return f"pip install '{requirement}'"


def missing_module(exc: BaseException) -> Optional[str]:
    """The top-level name of the module a ``ModuleNotFoundError`` is about, or None."""
    if not isinstance(exc, ModuleNotFoundError):
        return None
    name = getattr(exc, "name", None)
    if not name:
        return None
    return str(name).split(".")[0]


def dependency_message(module: str, *, needed_by: str, distribution: Optional[str]) -> str:
    """The sentence explaining that ``module`` is missing and how to install it."""
    return (
        f"{needed_by} needs the Python module '{module}', which is not installed; "
        f"install it with: {install_hint(module, distribution)}"
    )


def require(module: str, *, needed_by: str, distribution: str = CORE_DISTRIBUTION) -> Any:
    """Import and return ``module``, or raise :class:`MissingDependencyError` saying what to install.

    Only a missing ``module`` itself (or one of its parent packages) is turned into that error;
    a module that is installed but fails to import raises as it is.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = missing_module(exc)
        if missing is None or missing != module.split(".")[0]:
            raise
        raise MissingDependencyError(
            dependency_message(missing, needed_by=needed_by, distribution=distribution), name=missing
        ) from None
