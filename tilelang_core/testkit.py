"""A kit for testing backend plugins: throwaway plugin distributions, really installed.

Plugin authors and the core's own tests use it to create a plugin *distribution* on disk, make
it visible to ``importlib.metadata`` (a real ``.dist-info`` with ``entry_points.txt`` on a path
added to ``sys.path``, or a real ``pip install`` of a generated project), and check that an
entry-point module imports cheaply.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator, Optional

from .backends.discovery import ENTRY_POINT_GROUP
from .backends.isolation import HEAVY_MODULES  # noqa: F401 - part of the kit: what an entry-point module must not import

#: Build hook added by :func:`plugin_source` when the body brings none (the hook is required).
REFUSING_BUILD_HOOK = """
@hookimpl
def tilelang_backend_build(artifact, options):
    from tilelang_core.errors import KernelNotSupportedError
    raise KernelNotSupportedError("this throwaway test backend builds no kernels")
"""


def spec_dict(name: str, targets: Optional[dict[str, dict]] = None, **fields: Any) -> dict:
    """A minimal valid declaration for backend ``name`` (targets default to ``c`` priority 1)."""
    data: dict[str, Any] = {
        "name": name,
        "description": f"throwaway test backend {name}",
        "targets": targets or {"c": {"priority": 1, "consumes": ["device_source"], "device_language": "c"}},
    }
    data.update(fields)
    return data


def plugin_source(
    spec: Any, *, api: Any = 1, body: str = "", probe: Optional[dict] = None, build_hook: bool = True
) -> str:
    """Python source of an entry-point module declaring ``spec`` (a dict, or source text).

    ``body`` is appended verbatim (more hook implementations, or code that raises on import);
    ``probe`` is returned from ``tilelang_backend_probe`` for every target when given. When
    ``body`` defines no ``tilelang_backend_build`` (a required hook), one that refuses every
    kernel (:data:`REFUSING_BUILD_HOOK`) is added, unless ``build_hook`` is False.
    """
    spec_expr = spec if isinstance(spec, str) else json.dumps(spec)
    src = f"""
        from tilelang_core.hookspecs import hookimpl
        TILELANG_PLUGIN_API = {api!r}
        null, true, false = None, True, False

        @hookimpl
        def tilelang_backend_spec():
            return {spec_expr}
    """
    src = textwrap.dedent(src)
    if probe is not None:
        src += textwrap.dedent(
            f"""
            @hookimpl
            def tilelang_backend_probe(target_kind):
                return {json.dumps(probe)}
            """
        )
    body = textwrap.dedent(body)
    if build_hook and "def tilelang_backend_build" not in body:
        src += REFUSING_BUILD_HOOK
    return src + "\n" + body


def _normalized(dist: str) -> str:
    return dist.replace("-", "_").lower()


def write_distribution(
    root: Path,
    name: str,
    source: str,
    *,
    distribution: Optional[str] = None,
    version: str = "1.0.0",
    entry_point_name: Optional[str] = None,
    package: Optional[str] = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """Write an installed-looking distribution (package + ``.dist-info``) under ``root``.

    ``requires`` become its ``Requires-Dist`` lines (e.g. ``"tilelang-core>=0.1,<0.2"``).

    Putting ``root`` on ``sys.path`` (see :func:`on_path`) makes it discoverable exactly as a pip
    install would. Returns ``root``.
    """
    distribution = distribution or f"tilelang-backend-{name.replace('_', '')}"
    package = package or f"{_normalized(distribution)}"
    pkg_dir = root / package
    pkg_dir.mkdir(parents=True, exist_ok=True)
    (pkg_dir / "__init__.py").write_text("")
    (pkg_dir / "plugin.py").write_text(source)
    info = root / f"{_normalized(distribution)}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n{entry_point_name or name} = {package}.plugin\n"
    )
    (info / "top_level.txt").write_text(package + "\n")
    (info / "RECORD").write_text("")
    return root


def write_project(root: Path, name: str, source: str, *, distribution: Optional[str] = None, version: str = "1.0.0") -> Path:
    """Write a pip-installable project (pyproject.toml + package) for backend ``name``; returns its dir."""
    distribution = distribution or f"tilelang-backend-{name.replace('_', '')}"
    package = _normalized(distribution)
    project = root / distribution
    (project / package).mkdir(parents=True, exist_ok=True)
    (project / package / "__init__.py").write_text("")
    (project / package / "plugin.py").write_text(source)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{distribution}"
            version = "{version}"
            dependencies = []

            [project.entry-points."{ENTRY_POINT_GROUP}"]
            {name} = "{package}.plugin"

            [tool.setuptools]
            packages = ["{package}"]
            """
        )
    )
    return project


def pip(*args: str) -> subprocess.CompletedProcess:
    """Run this interpreter's pip quietly (no network needed for local projects); raises on failure."""
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


@contextlib.contextmanager
def on_path(root: Path) -> Iterator[None]:
    """Make distributions under ``root`` importable and discoverable; undo on exit.

    Refreshes the process-wide backend registry on entry and exit, and forgets the plugin
    modules imported from ``root``.
    """
    from .backends import get_registry

    sys.path.insert(0, str(root))
    get_registry().refresh()
    try:
        yield
    finally:
        sys.path.remove(str(root))
        for mod_name, mod in list(sys.modules.items()):
            if str(getattr(mod, "__file__", "") or "").startswith(str(root)):
                del sys.modules[mod_name]
        get_registry().refresh()


@contextlib.contextmanager
def isolated(root: Path) -> Iterator[None]:
    """Like :func:`on_path`, but the process-wide registry sees *only* the plugins under ``root``.

    Tests of selection and listing use it so that really installed backends do not take part.
    """
    from .backends.registry import BackendRegistry, use_registry

    with on_path(root), use_registry(BackendRegistry(path=[str(root)])):
        yield


def subprocess_env(*roots: Path) -> dict[str, str]:
    """Environment for a fresh interpreter that also sees the distributions under ``roots``."""
    env = dict(os.environ)
    paths = [str(r) for r in roots] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def heavy_imports_of(module: str, env: Optional[dict[str, str]] = None) -> list[str]:
    """Import ``module`` in a fresh interpreter; return which :data:`HEAVY_MODULES` it pulled in."""
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        f"print(json.dumps(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def installed_entry_point_modules() -> dict[str, str]:
    """``{backend name: entry-point module}`` for every installed backend plugin."""
    from .backends.discovery import discover

    return {ep.name: ep.value.split(":")[0] for ep in discover()}
