"""Wheels as users install them: build the core's and every plugin's wheel (scripts/build-wheels.sh),
install them into a fresh venv from the wheel folders alone (no source tree on the path), and run
the main job (``tilelang backends``, examples/run_all.py) from there.

Dependency wheels (torch 2.13.0 CPU, apache-tvm, ...) are kept between runs in
``$TILELANG_WHEEL_DEPS`` (default ``~/.cache/tilelang-core/wheel-deps``), so reruns copy nothing.
The torch wheel is checked there (the CPU build, no CUDA wheels pulled), but the fresh venv gets
this environment's torch through a ``.pth`` file (tests/torch_site.py) rather than unpacking and
byte-compiling its 1 GB again: pip sees it installed and checks its version against the pins;
everything else comes from the wheel folders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tilelang_core.scaffold import core_requirement

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from torch_site import add_to_venv, link_torch_site  # noqa: E402

pytestmark = pytest.mark.exclusive  # builds every project's wheel in the source tree

PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())


def _deps_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilelang-core" / "wheel-deps"
    return Path(os.environ.get("TILELANG_WHEEL_DEPS") or default)


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(kwargs.pop("env", {}))
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=900, **kwargs)


def _project(plugin: Path) -> dict:
    import tomllib

    return tomllib.loads((plugin / "pyproject.toml").read_text())["project"]


def _distribution(plugin: Path) -> str:
    return _project(plugin)["name"]


def _dependencies(plugin: Path) -> list[str]:
    return _project(plugin).get("dependencies", [])


# not marked slow: CI installs the wheels users get into a fresh venv and runs the main job (README)
def test_wheels_install_into_a_fresh_venv_and_run_the_main_job(tmp_path):
    wheels, deps = tmp_path / "wheels", _deps_dir()
    built = _run(["bash", ROOT / "scripts" / "build-wheels.sh", wheels, deps], env={"PYTHON": sys.executable})
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert built.stderr.strip() == "", f"building wheels printed warnings:\n{built.stderr[-3000:]}"

    names = {w.name.split("-")[0]: w for w in wheels.glob("*.whl")}
    expected = {"tilelang_core"} | {_distribution(p).replace("-", "_") for p in PLUGINS}
    assert set(names) == expected
    with zipfile.ZipFile(names["tilelang_backend_cython"]) as z:
        assert any(n.startswith("tilelang_backend_cython/_dispatch.") and n.endswith(".so") for n in z.namelist())
    for name, wheel in names.items():
        if name == "tilelang_core":
            continue
        with zipfile.ZipFile(wheel) as z:
            meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        pin = core_requirement().replace("tilelang-core", "")
        assert any(line.startswith("Requires-Dist: tilelang-core") and all(p in line for p in pin.split(","))
                   for line in meta.splitlines()), f"{wheel.name} does not pin {core_requirement()}"
    torch_wheels = [w.name for w in deps.glob("torch-*.whl")]
    assert torch_wheels and all(w.startswith("torch-2.13.0+cpu-") for w in torch_wheels), torch_wheels
    wanted = {d.split(">")[0].split("<")[0].split("=")[0].strip().replace("-", "_")
              for p in PLUGINS for d in _dependencies(p) if d.startswith("nvidia")}
    pulled = {w.name.split("-")[0] for w in deps.glob("nvidia_*.whl")}
    assert pulled <= wanted, f"CUDA wheels no plugin asked for (a CUDA build of torch?): {sorted(pulled - wanted)}"

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", venv]).returncode == 0
    py = venv / "bin" / "python"
    add_to_venv(py, link_torch_site(tmp_path / "torch-site", roots=("torch",)))
    supported = [_distribution(p) for p in PLUGINS if not (p / "RETIRED").exists()]
    find = ["--no-index", "--find-links", wheels, "--find-links", deps]
    installed = _run([py, "-m", "pip", "install", "-qq", *find, "tilelang-core", *supported])
    assert installed.returncode == 0, installed.stderr[-3000:]

    work = tmp_path / "work"  # no source tree here, and none on the path
    shutil.copytree(ROOT / "examples", work / "examples")
    env = {"TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    where = _run([py, "-c", textwrap.dedent("""
        import torch, tilelang_core, tilelang_backend_cython._dispatch as d
        print(tilelang_core.__file__); print(d.__file__); print(torch.__version__)
    """)], cwd=work, env=env)
    assert where.returncode == 0, where.stderr[-3000:]
    core_file, dispatch_file, torch_version = where.stdout.split()
    assert core_file.startswith(str(venv)) and dispatch_file.startswith(str(venv)) and torch_version == "2.13.0+cpu"
    listed_dists = _run([py, "-m", "pip", "list", "--format=json"], cwd=work)
    from_wheels = {d["name"].lower() for d in json.loads(listed_dists.stdout)}
    assert {"apache-tvm", "numpy", "pydantic", "pluggy", "tilelang-core"} <= from_wheels, sorted(from_wheels)

    listed = _run([venv / "bin" / "tilelang", "backends"], cwd=work, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    main = _run([py, work / "examples" / "run_all.py"], cwd=work, env=env)
    assert main.returncode == 0 and "0 failure(s)" in main.stdout, main.stdout[-3000:] + main.stderr[-3000:]

    # a core outside a plugin's pin: pip refuses, naming the pin
    fake = tmp_path / "fake-core"
    (fake / "src").mkdir(parents=True)
    (fake / "src" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tilelang-core"\nversion = "99.0.0"\n[tool.setuptools]\npackages = []\n'
    )
    assert _run([sys.executable, "-m", "pip", "wheel", "-qq", "--no-deps", "--no-build-isolation", "-w", fake,
                 fake / "src"]).returncode == 0
    refused = _run([py, "-m", "pip", "install", "--dry-run", *find, "--find-links", fake, "tilelang-core==99.0.0",
                    "tilelang-backend-cython"])
    assert refused.returncode != 0
    assert "tilelang-backend-cython 0.1.0 depends on tilelang-core<0.2 and >=0.1" in refused.stdout + refused.stderr, (
        refused.stdout[-2000:] + refused.stderr[-2000:])
