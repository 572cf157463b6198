"""Without torch or without TVM, every entry point says which module is missing and what to install.

The subprocesses run with a ``sitecustomize`` on ``PYTHONPATH`` whose meta-path finder makes the
module impossible to import (``ModuleNotFoundError``, as if it were not installed); everything
else is the real installation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

BLOCKER = '''
import sys

class _Blocker:
    """Make {module!r} (and its submodules) impossible to import, as if not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == {module!r} or name.startswith({module!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
'''

KERNEL = '''
import tilelang.language as T

@T.prim_func
def double(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=16) as bx:
        for i in T.Parallel(16):
            B[i] = A[i] * 2.0
'''

LIMIT = 240


def blocked_env(tmp_path, module, cache_dir):
    import os

    folder = tmp_path / f"no_{module}"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(BLOCKER.format(module=module))
    (folder / "kernels_for_test.py").write_text(KERNEL)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TILELANG_CACHE_DIR"] = str(cache_dir)
    return env


def run(code, env, *args):
    cmd = [sys.executable, *args] if args else [sys.executable, "-c", textwrap.dedent(code)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=LIMIT)


TRY_ALL = """
import json
import tilelang
out = {}
def attempt(what, fn):
    try:
        fn()
        out[what] = "no error"
    except Exception as exc:
        out[what] = f"{type(exc).__name__}: {exc}"
attempt("compile cython", lambda: tilelang.compile(__import__("kernels_for_test").double, target="c", execution_backend="cython"))
attempt("compile auto", lambda: tilelang.compile(__import__("kernels_for_test").double, target="c"))
attempt("load", lambda: tilelang.load(EXPORTED))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_compile_load_and_listing_say_torch_is_missing_with_torch_blocked_by_sitecustomize(tmp_path, monkeypatch):
    import tilelang

    sys.path.insert(0, str(tmp_path))
    try:
        (tmp_path / "kernel_to_export.py").write_text(KERNEL)
        monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
        from kernel_to_export import double

        exported = tmp_path / "exported"
        tilelang.compile(double, target="c", execution_backend="cython").export(str(exported))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kernel_to_export", None)

    env = blocked_env(tmp_path, "torch", tmp_path / "cache")
    assert "ModuleNotFoundError" in run("import torch", env).stderr  # the blocker works

    listing = run("", env, "-m", "tilelang", "backends", "--json")
    assert listing.returncode == 0, listing.stderr  # unavailable here, not broken
    cython = {r["name"]: r for r in json.loads(listing.stdout)}["cython"]
    assert cython["status"] == "ok"
    assert not cython["targets"]["c"]["available"]
    assert "Python module 'torch' is not installed" in cython["targets"]["c"]["reason"]
    assert "pip install 'torch" in cython["targets"]["c"]["reason"]

    tried = run(TRY_ALL.replace("EXPORTED", repr(str(exported))), env)
    assert tried.returncode == 0, tried.stderr
    result = json.loads(tried.stdout.strip().splitlines()[-1])
    for what, message in result.items():
        assert "torch" in message and "pip install 'torch" in message, (what, message)
        assert "broken" not in message and "einstall" not in message, (what, message)
    assert result["compile cython"].startswith("BackendUnavailableError")
    assert result["compile auto"].startswith("NoBackendForTargetError")
    assert result["load"].startswith("BackendDependencyError") and "needs the Python module 'torch'" in result["load"]


@pytest.mark.slow
def test_compile_and_language_say_tvm_is_missing_with_tvm_blocked_by_sitecustomize(tmp_path):
    env = blocked_env(tmp_path, "tvm", tmp_path / "cache")
    code = """
    import json
    import tilelang
    out = {}
    try:
        tilelang.compile(object(), target="c")
    except Exception as exc:
        out["compile"] = [type(exc).__name__, str(exc), isinstance(exc, ImportError)]
    try:
        import tilelang.language as T
    except Exception as exc:
        out["language"] = [type(exc).__name__, str(exc)]
    print(json.dumps(out))
    """
    out = run(code, env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    name, message, is_import_error = result["compile"]
    assert name == "MissingDependencyError" and is_import_error
    assert "tilelang.compile" in message and "Python module 'tvm', which is not installed" in message
    assert "pip install 'apache-tvm" in message and "0.27" in message  # tilelang-core's own pin
    name, message = result["language"]
    assert name == "MissingDependencyError" and "pip install 'apache-tvm" in message
    listing = run("", env, "-m", "tilelang", "backends")
    assert listing.returncode == 0, listing.stderr
    assert "unavailable: Python module 'tvm' is not installed; install it with: pip install 'apache-tvm" in listing.stdout
