"""What a hunt through unusual environments found (each test names the environment):

- a file system mounted ``noexec`` as the temporary folder, the cache or an export's folder: every
  load failed with "failed to map segment from shared object" and advice that could not help
  (recompile; "a function it calls is defined nowhere"), and a cache there removed and rebuilt
  every entry in every process;
- a non-UTF-8 locale (``LC_ALL=C PYTHONCOERCECLOCALE=0``) with a non-ASCII temporary folder: the
  cython backend was reported broken (UnicodeEncodeError), tvm_ffi failed with a codec message;
- a temporary folder path of about 4 KB: cython raised a bare "File name too long";
- a relative ``TMPDIR`` such as ``-tmp``: gcc passed ``-tmp/ccXXXX.s`` to ``as`` as an option;
- a source checkout of the cython plugin on ``sys.path`` (Python run from its folder): "the dispatch
  extension is not built; reinstall", which cannot help.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.cache.store import CacheWarning
from tilelang_core.compiler_process import run_compiler
from tilelang_core.errors import ArtifactError, BuildError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vadd_kernel import N, vadd  # noqa: E402


def _fresh_tmpdir(monkeypatch, folder: Path) -> None:
    import tempfile

    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)


# -- noexec -----------------------------------------------------------------------------------------


def test_a_cache_on_a_noexec_file_system_is_memory_only_standin(tmp_path, monkeypatch):
    """Stand-in: ``os.statvfs`` reports the cache folder ``noexec`` (mounting needs root)."""
    cache = tmp_path / "cache"
    real = os.statvfs

    class Flags:
        def __init__(self, st):
            self.st = st

        def __getattr__(self, name):
            return getattr(self.st, name)

        @property
        def f_flag(self):
            return self.st.f_flag | os.ST_NOEXEC

    monkeypatch.setattr(os, "statvfs", lambda p: Flags(real(p)) if str(p).startswith(str(cache)) else real(p))
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(cache))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(vadd(), out_idx=-1, target="c", execution_backend="cython")
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and "is on a file system mounted noexec, from which no kernel library can be loaded" in said[0]
    assert "on another file system" in said[0]
    a, b = torch.randn(N), torch.randn(N)
    torch.testing.assert_close(kernel(a, b), a + b)
    assert not (cache / "kernels").exists() or not any((cache / "kernels").iterdir())


@pytest.fixture
def noexec_mount(tmp_path):
    """A real tmpfs mounted noexec (root only; skipped where it cannot be mounted)."""
    folder = tmp_path / "noexec"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a noexec tmpfs needs root and mount")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,noexec", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        import gc

        gc.collect()  # kernels and files of the test
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)  # detached once nothing uses it


@pytest.mark.parametrize("backend, target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_an_export_on_a_noexec_mount_says_so(noexec_mount, monkeypatch, backend, target):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    path = tilelang.compile(vadd(), out_idx=-1, target=target, execution_backend=backend).export(noexec_mount / "k")
    with pytest.raises(ArtifactError, match=r"is on a file system mounted noexec, from which no library can be loaded"):
        tilelang.load(path)


@pytest.mark.parametrize("backend", ["cython", "tvm_ffi"])
def test_a_build_in_a_noexec_temporary_folder_says_so(noexec_mount, monkeypatch, backend):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    _fresh_tmpdir(monkeypatch, noexec_mount)
    with pytest.raises(BuildError, match=r"is on a file system mounted noexec, from which no library can be loaded"):
        tilelang.compile(vadd(), out_idx=-1, target="c", execution_backend=backend)


# -- locale, long and relative temporary folders ----------------------------------------------------

_LOCALE_CHILD = """
import os, sys, tilelang
sys.path.insert(0, {tests!r})
from vadd_kernel import vadd
print("encoding", sys.getfilesystemencoding())
tilelang.compile(vadd(), out_idx=-1, target="c", execution_backend="cython")
print("cython ok")
kernel = tilelang.compile(vadd(), out_idx=-1, target="llvm", execution_backend="tvm_ffi")
try:
    kernel.export(os.path.join(os.path.dirname(os.environ["TMPDIR"]), "exp"))  # as the file system names it
except Exception as exc:
    print("tvm_ffi export:", type(exc).__name__, exc)
"""


def test_a_non_utf8_locale_with_a_non_ascii_temporary_folder(tmp_path):
    folder = tmp_path / "ké rnel ✓"
    (folder / "tmp").mkdir(parents=True)
    script = tmp_path / "child.py"
    script.write_text(_LOCALE_CHILD.format(tests=str(Path(__file__).resolve().parent)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG"))}
    env.update(LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0", TMPDIR=str(folder / "tmp"),
               TILELANG_DISABLE_CACHE="1")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=300)
    out = done.stdout.decode("utf-8", "replace")
    assert "encoding ascii" in out, out + done.stderr.decode("utf-8", "replace")
    assert "cython ok" in out, out + done.stderr.decode("utf-8", "replace")[-3000:]
    assert "tvm_ffi export: BuildError" in out and "is not UTF-8 in this locale" in out, out


def test_a_temporary_folder_path_too_long_for_a_build_folder_says_what_to_do(tmp_path, monkeypatch):
    deep = tmp_path
    while len(os.fsencode(str(deep))) < 4075:
        deep = deep / ("d" * min(250, 4075 - len(os.fsencode(str(deep)))))
    deep.mkdir(parents=True)
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    _fresh_tmpdir(monkeypatch, deep)
    with pytest.raises(OSError, match=r"cannot make a build folder .* set TMPDIR to a writable folder with free "
                                      r"space and a shorter path"):
        tilelang.compile(vadd(), out_idx=-1, target="c", execution_backend="cython")


def test_the_compiler_gets_an_absolute_temporary_folder(tmp_path, monkeypatch):
    (tmp_path / "-tmp").mkdir()
    monkeypatch.chdir(tmp_path)
    run = run_compiler(["sh", "-c", 'echo "$TMPDIR"'], env={**os.environ, "TMPDIR": "-tmp"})
    seen = Path(run.output.strip())
    assert seen.is_absolute() and seen.parent == tmp_path / "-tmp", seen


# -- a source checkout of the plugin on sys.path ------------------------------------------------------


def test_a_source_copy_of_the_cython_plugin_shadowing_the_installed_one_is_named(tmp_path):
    import tilelang_backend_cython

    installed = Path(tilelang_backend_cython.__file__).parent
    shutil.copytree(installed, tmp_path / "tilelang_backend_cython",
                    ignore=shutil.ignore_patterns("_dispatch*.so", "_dispatch*.pyd", "__pycache__"))
    code = ("from tilelang_backend_cython.plugin import tilelang_backend_probe\n"
            "print(tilelang_backend_probe('c').reason)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert f"it shadows the installed one in {installed.resolve()}" in done.stdout, done.stdout + done.stderr
    assert "run Python from another folder" in done.stdout
