"""``tilelang backends new`` -> pip install -> ``tilelang backends check`` -> pip uninstall, with no edits."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tilelang_core.scaffold import ScaffoldError, core_requirement, write_backend
from tilelang_core.testkit import pip

pytestmark = pytest.mark.exclusive  # installs and uninstalls a generated backend in the venv

NAME = "kitscaffold"


def test_new_writes_a_complete_distribution(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tilelang", "backends", "new", "my_cpu", "--path", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    project = tmp_path / "tilelang-backend-mycpu"
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert files == ["README.md", "pyproject.toml", "tests/test_conformance.py", "tilelang_backend_my_cpu/__init__.py",
                     "tilelang_backend_my_cpu/plugin.py"]
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "tilelang-backend-mycpu" and meta["license"] == "Apache-2.0"
    assert core_requirement() in meta["dependencies"] and core_requirement().startswith("tilelang-core>=")
    assert meta["entry-points"]["tilelang.backends"] == {"my_cpu": "tilelang_backend_my_cpu.plugin"}
    assert 'conformance_tests("my_cpu")' in (project / "tests" / "test_conformance.py").read_text()
    with pytest.raises(ScaffoldError, match="exists"):
        write_backend("my_cpu", tmp_path)
    with pytest.raises(ScaffoldError, match="lowercase identifier"):
        write_backend("My-Backend", tmp_path)


# not marked slow: CI checks that a generated backend installs and passes the check unchanged
def test_generated_backend_installs_and_passes_the_check_unchanged(tmp_path):
    project = write_backend(NAME, tmp_path)
    pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(project))
    try:
        env = {**__import__("os").environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
        listed = subprocess.run([sys.executable, "-m", "tilelang", "backends"], capture_output=True, text=True, env=env)
        assert NAME in listed.stdout
        check = subprocess.run([sys.executable, "-m", "tilelang", "backends", "check", NAME], capture_output=True,
                               text=True, env=env, timeout=900)
        assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-2000:]
        assert check.stdout.strip().splitlines()[-1].endswith("passed, 0 failed, 0 skipped")
    finally:
        pip("uninstall", "-y", f"tilelang-backend-{NAME}")
    listed = subprocess.run([sys.executable, "-m", "tilelang", "backends"], capture_output=True, text=True)
    assert NAME not in listed.stdout
