"""The kernel cache key includes a content hash of the backend plugin's installed files, so a plugin
reinstalled with changed code at the same version never gets kernels its old code built."""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

import pytest

import tilelang
from tilelang_core.backends import get_registry
from tilelang_core.backends.files import plugin_files_hash
from tilelang_core.cache import active_cache
from tilelang_core.cache.key import compute_key
from tilelang_core.jit.compile import clear_memory
from tilelang_core.testkit import on_path, pip, plugin_source, spec_dict, write_project

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))


def forget_plugins(root: Path) -> None:
    """What a new process would see: plugin modules not imported yet, no record, empty memory cache."""
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", "") or "").startswith(str(root)):
            del sys.modules[name]
    get_registry().refresh()
    clear_memory()
    active_cache().memory.clear()


def test_key_changes_with_the_plugin_files_hash():
    func = KIT["make_prim_func"]("vadd", 16)
    args = dict(target="c", target_kind="c", target_host=None, backend_name="pyadd", backend_version="1.0.0", native_compiler="",
                pass_configs=None, compile_flags=[], out_idx=-1)
    assert compute_key(func, backend_files="a" * 64, **args) != compute_key(func, backend_files="b" * 64, **args)
    assert compute_key(func, backend_files="a" * 64, **args) == compute_key(func, backend_files="a" * 64, **args)


def test_changed_plugin_code_at_the_same_version_rebuilds_instead_of_loading_stale_kernels(tmp_path, monkeypatch):
    site = tmp_path / "site"
    KIT["install_pyadd"](site)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.setenv("TL_TEST_BUILD_LOG", str(tmp_path / "builds.log"))
    func = KIT["make_prim_func"]("vadd", 16)
    builds = lambda: KIT["read_log"](tmp_path / "builds.log")  # noqa: E731
    with on_path(site):
        tilelang.compile(func, target="c", execution_backend="pyadd", out_idx=-1)
        assert len(builds()) == 1
        forget_plugins(site)
        tilelang.compile(func, target="c", execution_backend="pyadd", out_idx=-1)
        assert len(builds()) == 1, "same plugin files: the saved kernel is loaded"
        plugin = site / "tilelang_backend_pyadd" / "plugin.py"
        plugin.write_text(plugin.read_text() + "\n# a changed build hook, same version 1.0.0\n")
        forget_plugins(site)
        tilelang.compile(func, target="c", execution_backend="pyadd", out_idx=-1)
        assert len(builds()) == 2, "the plugin's code changed: its kernels are rebuilt"


def test_hash_of_a_distribution_without_digests_reads_its_package_and_ignores_bytecode(tmp_path):
    import importlib_metadata

    KIT["install_pyadd"](tmp_path)
    with on_path(tmp_path):
        (dist,) = [d for d in importlib_metadata.distributions(path=[str(tmp_path)])]
        first = plugin_files_hash(dist, "tilelang_backend_pyadd")
        cache = tmp_path / "tilelang_backend_pyadd" / "__pycache__"
        cache.mkdir(exist_ok=True)
        (cache / "plugin.cpython-311.pyc").write_bytes(b"bytecode")
        assert plugin_files_hash(dist, "tilelang_backend_pyadd") == first
        (tmp_path / "tilelang_backend_pyadd" / "helpers.py").write_text("X = 1\n")
        assert plugin_files_hash(dist, "tilelang_backend_pyadd") != first


@pytest.mark.slow
def test_hash_of_a_pip_installed_plugin_changes_when_it_is_reinstalled_with_other_code(tmp_path):
    import importlib_metadata

    target = tmp_path / "installed"

    def install(comment: str) -> str:
        src = plugin_source(spec_dict("reinstalled"), body=f"# {comment}\n")
        project = write_project(tmp_path / f"src-{comment}", "reinstalled", src, version="1.0.0")
        pip("install", "--no-deps", "--no-build-isolation", "--no-index", "--upgrade", "--target", str(target), str(project))
        (dist,) = [d for d in importlib_metadata.distributions(path=[str(target)])]
        assert dist.version == "1.0.0" and any(f.hash for f in dist.files)  # pip wrote digests into RECORD
        with on_path(target):
            start = time.perf_counter()
            digest = plugin_files_hash(dist, "tilelang_backend_reinstalled")
            assert time.perf_counter() - start < 1.0
        return digest

    first = install("first")
    assert install("first") == first  # same code, same hash
    assert install("second") != first
