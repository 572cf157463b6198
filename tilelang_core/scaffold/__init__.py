"""``tilelang backends new NAME``: write a complete, installable backend plugin distribution.

The distribution (``tilelang-backend-<name>``) has a ``pyproject.toml`` with the entry point and
a pin on the running core's minor version, the entry-point module with the hooks of a CPU (``c``)
backend (the C compiler on the artifact's device source, :mod:`ctypes` to call it,
:class:`tilelang_core.calling.CallChecker` for the calling convention), a test that runs the
conformance suite, and a README. Once installed (``pip install ./tilelang-backend-<name>``) it
passes ``tilelang backends check <name>`` unchanged; docs/writing-a-backend.md walks through it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from string import Template
from typing import Union

from ..errors import TileLangError

TEMPLATE = Path(__file__).with_name("template")
#: template file -> path in the distribution (``$package`` is replaced).
FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "package_init.py.tmpl": "$package/__init__.py",
    "plugin.py.tmpl": "$package/plugin.py",
    "test_conformance.py.tmpl": "tests/test_conformance.py",
}


class ScaffoldError(TileLangError, ValueError):
    """The backend name is not usable, or the distribution's directory exists already."""


def core_requirement() -> str:
    """``tilelang-core>=X.Y,<X.Y+1``: the core versions a new plugin is written for."""
    from .. import __version__

    major, minor = (int(p) for p in re.findall(r"\d+", __version__)[:2])
    return f"tilelang-core>={major}.{minor},<{major}.{minor + 1}"


def _fields(name: str) -> dict[str, str]:
    from .. import __version__
    from ..backends.discovery import pip_name_for

    return {"name": name, "distribution": pip_name_for(name), "package": f"tilelang_backend_{name}",
            "core_requirement": core_requirement(), "core_version": __version__}


def plugin_source(name: str) -> str:
    """The entry-point module a new backend ``name`` starts from (what ``new`` writes as plugin.py)."""
    return Template((TEMPLATE / "plugin.py.tmpl").read_text()).substitute(_fields(name))


def _refuse_taken_distribution(name: str, distribution: str) -> None:
    """Refuse a distribution name that an installed backend's distribution has already: installing
    the new one would silently uninstall that backend (``my_backend`` and ``mybackend`` both become
    ``tilelang-backend-mybackend``; ``cython`` is the installed ``tilelang-backend-cython``)."""
    from ..backends import get_registry
    from ..backends.discovery import _canonical

    for ep in get_registry().entry_points():
        if ep.distribution != _canonical(distribution):
            continue
        if ep.name == name:
            raise ScaffoldError(
                f"backend {name!r} is installed already, from {ep.distribution} {ep.version or ''}".rstrip()
                + f", the distribution this would write: installing it would uninstall that backend. Choose another "
                f"name, or uninstall it first (pip uninstall {ep.distribution})"
            )
        raise ScaffoldError(
            f"backend name {name!r} would be distributed as {distribution}, the distribution of the installed "
            f"backend {ep.name!r} ({ep.distribution} {ep.version or ''}".rstrip() + "): installing one would "
            f"uninstall the other. Choose a name that gives another distribution (underscores are dropped from "
            f"it), or uninstall that backend first (pip uninstall {ep.distribution})"
        )


def check_name(name: str) -> None:
    """Refuse a backend name that can never be used: not a lowercase identifier, or ``auto``.

    Split out of :func:`write_backend` so that ``tilelang backends new`` can tell an invalid name
    (a usage error, exit status 2; before, 1) from what is in the way here (a folder, the
    distribution of another installed backend: the command failed, 1).

    :raises ScaffoldError: with what is wrong and what to do.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name or "") or len(name) > 64:
        raise ScaffoldError(
            f"backend name must be a lowercase identifier (a letter, then letters, digits or underscores), got {name!r}"
        )
    from ..backends.selection import AUTO

    if name == AUTO:
        raise ScaffoldError(f"backend name {AUTO!r} is reserved: execution_backend='auto' means the automatic choice, so a "
                            "backend of that name could never be selected; choose another name")


def write_backend(name: str, path: Union[str, os.PathLike] = ".") -> Path:
    """Write the distribution of backend ``name`` under ``path``; returns its directory.

    :raises ScaffoldError: ``name`` is not a lowercase identifier or is ``auto``, its distribution
        name is that of an installed distribution of another backend, ``path`` is a file, or the
        directory exists.
    """
    check_name(name)
    if Path(path).exists() and not Path(path).is_dir():
        raise ScaffoldError(f"--path {path} is a file; give a directory to write the distribution in")
    fields = _fields(name)
    _refuse_taken_distribution(name, fields["distribution"])
    project = Path(path) / fields["distribution"]
    if project.exists():
        raise ScaffoldError(f"{project} exists; choose another --path or remove it")
    for source, target in FILES.items():
        out = project / Template(target).substitute(fields)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(Template((TEMPLATE / source).read_text()).substitute(fields))
    return project
