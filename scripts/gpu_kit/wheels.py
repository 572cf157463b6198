"""Wheels of a kit (build half): the project's own, and the dependencies the GPU machine may lack.

* :func:`build_project_wheels`: tilelang-core and the plugins of the kit's backends as wheels; a
  plugin with a compiled extension (cython) also as an sdist (the run half builds it with the GPU
  machine's compiler when no wheel fits its Python) and as a wheel for each target Python found
  here (the lent GPU machines run Python 3.12).
* :func:`runtime_requirements`: what the run needs besides torch, from the project wheels'
  metadata: their requirements less torch (the GPU machine's CUDA build is used), TVM (not needed
  to load kernels; too big to carry) and NVRTC with its headers and runtime (needed only to
  rebuild a cubin for another architecture; ~60 MB; a CUDA torch brings them anyway).
* :func:`download_dependency_wheels`: binary wheels of those requirements and of everything they
  need, at the versions installed here (the tested ones), for each target Python on manylinux
  x86-64 (``pip download --platform``) and for this machine's own Python.
* :func:`tvm_runtime_files`: TVM's runtime libraries (``libtvm_runtime.so`` and the CUDA
  sidecar, ~4 MB) and licence, so tvm_ffi kernels load where TVM is not installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]

#: Requirements the run half never installs from the kit (see the module docstring).
NOT_CARRIED = {"torch", "apache-tvm", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-cccl"}

#: The GPU machine's Python (the lent machines run 3.12) and the platform tags pip may pick there.
TARGET_PYTHON = "3.12"
DEFAULT_PYTHONS = (TARGET_PYTHON,)
MANYLINUX = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")

_IGNORE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".tlcache",
                                 ".pytest_cache", ".hypothesis", "*.so", "*.c")


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _run(cmd: list[str], what: str, cwd: Optional[Path] = None) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({' '.join(cmd)}):\n{(proc.stdout + proc.stderr)[-4000:]}")


def _pyproject(source: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        raise RuntimeError("building a kit needs Python 3.11 or newer (tomllib)") from None
    return tomllib.loads((source / "pyproject.toml").read_text())


def project_name(source: Path) -> str:
    """The distribution name a project folder declares (``[project] name`` of its pyproject.toml)."""
    return _normal(_pyproject(source)["project"]["name"])


def build_requirements(source: Path) -> list[str]:
    """``[build-system] requires`` of a project (what building its sdist needs)."""
    return list(_pyproject(source).get("build-system", {}).get("requires", []))


def project_sources(distributions: Optional[list[str]] = None) -> dict[str, Path]:
    """distribution -> folder of the core and of the plugins under ``plugins/`` (only those named
    in ``distributions``, when given; the core always)."""
    found = {project_name(ROOT): ROOT}
    for folder in sorted((ROOT / "plugins").glob("*_backend")):
        if (folder / "pyproject.toml").is_file():
            found[project_name(folder)] = folder
    if distributions is None:
        return found
    wanted = {_normal(d) for d in distributions}
    missing = wanted - set(found)
    if missing:
        raise RuntimeError(f"no project folder in {ROOT} builds {', '.join(sorted(missing))}")
    return {name: path for name, path in found.items() if path == ROOT or name in wanted}


def _copy_source(src: Path, into: Path) -> Path:
    """A clean copy of one project to build from (the checkout itself is never written to)."""
    dest = into / src.name
    if src == ROOT:
        dest.mkdir(parents=True)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(src / name, dest / name)
        for package in ("tilelang_core", "tilelang"):
            shutil.copytree(src / package, dest / package, ignore=_IGNORE)
    else:
        shutil.copytree(src, dest, ignore=_IGNORE)
    return dest


def find_python(version: str, explicit: Optional[str] = None) -> Optional[str]:
    """A Python ``version`` (``"3.12"``) here: ``explicit``, ``python3.12`` on PATH, or pyenv's."""
    for candidate in (explicit, shutil.which(f"python{version}")):
        if candidate and os.access(candidate, os.X_OK) and _runs(candidate, version):
            return candidate
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for candidate in sorted(glob.glob(os.path.join(root, "versions", f"{version}*", "bin", f"python{version}")),
                            reverse=True):
        if _runs(candidate, version):
            return candidate
    return None


def _runs(python: str, version: str) -> bool:
    try:
        return subprocess.run([python, "-c", f"import sys; assert '%d.%d' % sys.version_info[:2] == {version!r}"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def this_python() -> str:
    return "%d.%d" % sys.version_info[:2]


def build_project_wheels(out: Path, distributions: list[str], *, pythons: list[str],
                         interpreters: Optional[dict[str, str]] = None, log=print) -> dict:
    """The project's own wheels into ``out``: the core and the plugins in ``distributions``.

    Plain ``pip wheel --no-deps --no-build-isolation`` with this Python's build tools, on copies of
    the sources. A project with a compiled extension (a ``setup.py``) also gets its sdist, and a
    wheel for every other Python version in ``pythons`` for which an interpreter is found here
    (``interpreters``: version -> path; else ``pythonX.Y`` on PATH or pyenv's); where none is, the
    run half builds the sdist (its ``build_requirements`` travel as wheels too). (When
    scripts/build-wheels.sh is in main, the first step can call it instead.) Returns
    ``{"projects": [...], "compiled": [...], "build_requirements": [...], "notes": [...]}``.
    """
    notes: list[str] = []
    out.mkdir(parents=True, exist_ok=True)
    sources = project_sources(distributions)
    compiled = []
    with tempfile.TemporaryDirectory(prefix="gpu-kit-src-") as tmp:
        copies = {name: _copy_source(src, Path(tmp)) for name, src in sources.items()}
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
              *map(str, copies.values())], "building the project's wheels")
        for name, copy in copies.items():
            if not (copy / "setup.py").is_file():
                continue  # pure Python: the py3-none-any wheel runs on any Python
            compiled.append(name)
            _run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(out)!r})"],
                 f"the sdist of {name}", cwd=copy)
            for version in pythons:
                if version == this_python():
                    continue
                python = find_python(version, (interpreters or {}).get(version))
                if python is None:
                    notes.append(f"{name}: no Python {version} here, so no cp{version.replace('.', '')} wheel; "
                                 f"the run half builds it from the sdist")
                    continue
                try:
                    _run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(copy)],
                         f"the Python {version} wheel of {name}")
                    log(f"built the Python {version} wheel of {name} with {python}")
                except RuntimeError as exc:
                    notes.append(f"{name}: no Python {version} wheel ({str(exc).splitlines()[0]}); "
                                 f"the run half builds it from the sdist")
    build_needs = sorted({r for name in compiled for r in build_requirements(sources[name])})
    return {"projects": sorted(sources), "compiled": sorted(compiled), "build_requirements": build_needs,
            "notes": notes}


def _marker_env(python: str) -> dict[str, str]:
    return {"extra": "", "python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def _applies(req, pythons: list[str]) -> bool:
    return req.marker is None or any(req.marker.evaluate(_marker_env(p)) for p in pythons)


def runtime_requirements(projects: list[str], pythons: list[str]) -> list[str]:
    """The requirements (as declared) of ``projects`` that the run installs, sorted."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    found = {}
    for project in projects:
        for text in requires(project) or []:
            req = Requirement(text)
            name = _normal(req.name)
            if not _applies(req, pythons) or name in NOT_CARRIED or name.startswith("tilelang-"):
                continue
            found.setdefault(name, f"{name}{req.specifier}")
    return sorted(found.values())


def dependency_closure(requirements: list[str], pythons: list[str]) -> dict[str, str]:
    """name -> installed version of each requirement and everything it needs (on any of ``pythons``)."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    todo = [Requirement(r).name for r in requirements]
    closure: dict[str, str] = {}
    while todo:
        name = _normal(todo.pop())
        if name in closure or name in NOT_CARRIED:
            continue
        try:
            closure[name] = version(name)
        except PackageNotFoundError:
            raise RuntimeError(f"{name} is needed by the kit's run but not installed here; install it "
                               f"(bash scripts/setup.sh) and build the kit again") from None
        todo += [req.name for req in map(Requirement, requires(name) or []) if _applies(req, pythons)]
    return dict(sorted(closure.items()))


def download_dependency_wheels(out: Path, closure: dict[str, str], pythons: list[str]) -> None:
    """Binary wheels of ``closure`` for each Python version in ``pythons`` (manylinux x86-64;
    this Python's own platform for its own version), into ``out``."""
    pins = [f"{name}=={ver}" for name, ver in closure.items()]
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(out)]
    platforms = [arg for tag in MANYLINUX for arg in ("--platform", tag)]
    for version in pythons:
        if version == this_python():
            _run([*base, *pins], "downloading the dependency wheels for this Python")
        else:
            _run([*base, "--python-version", version, "--implementation", "cp", *platforms, *pins],
                 f"downloading the dependency wheels for Python {version}")


def tvm_runtime_files() -> tuple[list[Path], Optional[str]]:
    """TVM's runtime libraries and licence files here (empty with the reason when TVM is missing)."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, distribution

    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        return [], "apache-tvm is not installed here"
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib"
    libs = [lib / "libtvm_runtime.so", lib / "libtvm_runtime_cuda.so"]
    missing = [p.name for p in libs if not p.is_file()]
    if missing:
        return [], f"TVM here has no {', '.join(missing)}"
    try:
        dist = distribution("apache-tvm")
        licences = [Path(dist.locate_file(f)) for f in (dist.files or []) if Path(str(f)).name in ("LICENSE", "NOTICE")]
    except PackageNotFoundError:
        licences = []
    by_name: dict[str, Path] = {}
    for path in licences:  # one of each name (the wheel carries some twice)
        if path.is_file():
            by_name.setdefault(path.name, path)
    return libs + [by_name[n] for n in sorted(by_name)], None
