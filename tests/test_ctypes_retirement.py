"""The retired ``ctypes`` backend, in a real pip install / uninstall cycle.

Installed, ``execution_backend="ctypes"`` works and warns once, naming cython (which declares
``supersedes: ["ctypes"]``); uninstalled, asking for it says it is retired and that the
installed cython supersedes it. Upstream TileLang's ``dlpack`` (now ``tvm_ffi``) is answered the
same way. The venv is left as it was found.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

from tilelang_core.backends import get_registry
from tilelang_core.testkit import pip

pytestmark = pytest.mark.exclusive  # installs and uninstalls the ctypes plugin in the venv

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "ctypes_backend"

USE = textwrap.dedent(
    """
    import json, sys, warnings
    import torch, tilelang
    from tilelang_core.conformance import kernels
    from tilelang_core.errors import BackendNotInstalledError
    name = sys.argv[1]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kernels_built = [tilelang.compile(kernels.vadd_dyn(), out_idx=-1, target="c", execution_backend=name)
                             for _ in range(2)]
    except BackendNotInstalledError as exc:
        print(json.dumps({"error": str(exc)}))
        raise SystemExit(0)
    a, b = torch.randn(100), torch.randn(100)
    ok = all(torch.equal(k(a, b), a + b) for k in kernels_built)
    deprecations = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    print(json.dumps({"backend": kernels_built[0].backend.name, "ok": ok, "deprecations": deprecations}))
    """
)


def _use(name: str, tmp_path: Path) -> dict:
    env = {**__import__("os").environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", USE, name], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _installed() -> bool:
    try:
        distribution("tilelang-backend-ctypes")
        return True
    except PackageNotFoundError:
        return False


# not marked slow: CI checks the retired backend's install, use and uninstall
def test_install_use_uninstall_ask_again(tmp_path):
    if get_registry().get("cython") is None:
        pytest.skip("the cython backend (ctypes' successor) is not installed")
    was_installed = _installed()
    try:
        pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(PLUGIN))
        used = _use("ctypes", tmp_path)
        assert used["backend"] == "ctypes" and used["ok"]
        assert len(used["deprecations"]) == 1, used["deprecations"]  # once, though selected twice
        assert "execution backend 'ctypes' is deprecated" in used["deprecations"][0]
        assert "use execution_backend='cython' instead" in used["deprecations"][0]

        pip("uninstall", "-y", "tilelang-backend-ctypes")
        error = _use("ctypes", tmp_path)["error"]
        assert error.startswith("execution backend 'ctypes' is retired: the installed backend 'cython' supersedes it; "
                                "use execution_backend='cython'"), error
        assert error.index("'cython'") < error.index("pip install tilelang-backend-ctypes")
    finally:
        if was_installed and not _installed():
            pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(PLUGIN))
        elif not was_installed and _installed():
            pip("uninstall", "-y", "tilelang-backend-ctypes")
        get_registry().refresh()


def test_upstream_dlpack_name_points_at_tvm_ffi(tmp_path):
    if get_registry().get("tvm_ffi") is None:
        pytest.skip("the tvm_ffi backend is not installed")
    from tilelang_core.backends import select_backend
    from tilelang_core.errors import BackendNotInstalledError

    with pytest.raises(BackendNotInstalledError) as info:
        select_backend("dlpack", "llvm")
    assert str(info.value).startswith(
        "execution backend 'dlpack' is retired: the installed backend 'tvm_ffi' supersedes it; use execution_backend='tvm_ffi'"
    )


def test_ctypes_stays_the_smallest_complete_backend():
    """Under 150 lines of code (non-blank, non-comment), and its tests are the conformance suite
    plus one short test of what the suite cannot see (its folders go with its kernels)."""

    def code(files):
        return [line for f in files for line in f.read_text().splitlines()
                if line.strip() and not line.strip().startswith("#")]

    lines = code(sorted((PLUGIN / "tilelang_backend_ctypes").glob("*.py")))
    assert len(lines) < 150, f"the ctypes backend has {len(lines)} lines of code"
    tests = sorted((PLUGIN / "tests").glob("*.py"))
    assert [t.name for t in tests] == ["test_conformance.py", "test_ctypes_folders.py"]
    assert 'conformance_tests("ctypes")' in tests[0].read_text()
    assert len(code(tests[1:])) < 40, "the ctypes backend's own tests grew: move generic checks into the suite"
