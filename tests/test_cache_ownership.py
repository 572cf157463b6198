"""The cache uses, cleans and clears only a directory that is its own (CACHEDIR.TAG).

``TILELANG_CACHE_DIR`` pointed at a user's folder by mistake (a project with its own ``tmp/``,
``kernels/`` and a file named ``autotune``) lost files before: a plain compile reaped
``tmp/`` items older than a day, and ``tilelang cache clear`` emptied ``tmp/`` and unlinked files
under ``kernels/`` and the ``autotune`` file. Kernels come from the throwaway backend ``pyadd``
(test_cache_kit.py) through its real hooks and files; the CLI runs in a subprocess.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import tilelang
from tilelang_core.cache import CacheWarning
from tilelang_core.cache import ownership
from tilelang_core.cache.store import KernelCache
from tilelang_core.errors import CacheError

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))
SAFETY = runpy.run_path(str(Path(__file__).with_name("test_cache_safety.py")))
TIMEOUT = 90


@pytest.fixture
def env(tmp_path, monkeypatch):
    yield from KIT["cache_env"](tmp_path, monkeypatch)


def files_under(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def user_project(root: Path) -> dict[str, str]:
    """A user's folder with the cache's folder names in it, its tmp/ items three days old."""
    (root / "tmp" / "experiments").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "tmp" / "experiments" / "results.csv").write_text("precious")
    (root / "tmp" / "notes.txt").write_text("precious")
    (root / "kernels" / "my_kernel.cu").write_text("precious")
    (root / "autotune").write_text("precious")
    old = time.time() - 3 * 86400
    for path in (root / "tmp" / "notes.txt", root / "tmp" / "experiments"):
        os.utime(path, (old, old))
    os.chmod(root, 0o700)
    return files_under(root)


def test_a_users_folder_is_neither_cleaned_nor_cleared(env):
    before = user_project(env.cache_dir)
    with pytest.warns(CacheWarning, match=r"is not a tilelang kernel cache: it is not empty \(autotune, kernels, tmp\) "
                      r"and has no CACHEDIR.TAG.*new or empty directory \(until then, kernels are cached in memory only\)"):
        kernel = KernelCache(env.cache_dir).get_or_build("ab" * 32, env.record, env.builder())
    SAFETY["run"](kernel)  # the kernel works, from memory
    assert files_under(env.cache_dir) == before  # nothing written, nothing removed
    assert tilelang.cache.info()["not_a_cache"].startswith(f"{env.cache_dir} is not a tilelang kernel cache")
    with pytest.raises(CacheError, match="is not a tilelang kernel cache"):
        tilelang.cache.clear()
    cli = subprocess.run([sys.executable, "-m", "tilelang", "cache", "clear"], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert cli.returncode != 0 and "is not a tilelang kernel cache" in cli.stderr, cli.stderr
    info = subprocess.run([sys.executable, "-m", "tilelang", "cache", "info"], capture_output=True, text=True,
                          timeout=TIMEOUT, check=True).stdout
    assert "warning:  " in info and "is not a tilelang kernel cache" in info
    assert files_under(env.cache_dir) == before


def test_new_empty_and_older_caches_are_claimed_with_a_tag(env, tmp_path):
    KernelCache(env.cache_dir).get_or_build("ab" * 32, env.record, env.builder())  # new: created and tagged
    assert ownership.has_tag(env.cache_dir)
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    KernelCache(empty).get_or_build("ab" * 32, env.record, env.builder())
    assert ownership.has_tag(empty) and (empty / "kernels" / "ab").is_dir()
    older = tmp_path / "older"  # the layout of a cache made before the tag existed
    for sub in ("kernels", "tmp", "locks", "autotune"):
        (older / sub).mkdir(parents=True, mode=0o700)
    os.chmod(older, 0o700)
    KernelCache(older).get_or_build("ab" * 32, env.record, env.builder())
    assert ownership.has_tag(older)
    (older / "notes.txt").write_text("added later, by hand")
    assert KernelCache(older).clear() == 1  # tagged: its own, whatever else is there
    assert (older / "notes.txt").read_text() == "added later, by hand"


def test_a_tag_that_is_not_one_does_not_claim(env):
    env.cache_dir.mkdir(mode=0o700)
    (env.cache_dir / "CACHEDIR.TAG").write_text("my own notes")
    assert not ownership.has_tag(env.cache_dir)
    with pytest.raises(ownership.ForeignDirectoryError, match=r"is not a tilelang kernel cache: it is not empty \(CACHEDIR.TAG\)"):
        ownership.claim(env.cache_dir)
    (env.cache_dir / "CACHEDIR.TAG").unlink()
    os.symlink("/etc/hostname", env.cache_dir / "CACHEDIR.TAG")
    assert not ownership.has_tag(env.cache_dir)  # a link is not followed


def test_only_what_the_cache_writes_in_tmp_is_reaped_or_cleared(env):
    cache = KernelCache(env.cache_dir)
    cache.get_or_build("ab" * 32, env.record, env.builder())
    tmp = env.cache_dir / "tmp"
    ours = [tmp / f"{'cd' * 32}.123.0badcafe", tmp / f"trash.{'e' * 32}", tmp / f"autotune-{'f' * 64}.7.12345678.json"]
    theirs = [tmp / "notes.txt", tmp / f"{'cd' * 32}.x.0badcafe"]
    for path in ours + theirs:
        path.mkdir() if path.name.startswith("trash") else path.write_text("x")
    old = time.time() - 3 * 86400
    for path in ours + theirs:
        os.utime(path, (old, old))
    KernelCache(env.cache_dir).disk.prepare()  # a new process: reaps stale leftovers
    assert [p.exists() for p in ours] == [False] * 3 and all(p.exists() for p in theirs)
    for path in ours:
        path.mkdir() if path.name.startswith("trash") else path.write_text("x")
        os.utime(path, (old, old))  # leftovers: what was written in the last minutes may be in progress (kept)
    report = KernelCache(env.cache_dir).clear_report()
    assert report["entries"] == 1 and not any(p.exists() for p in ours)
    assert all(p.exists() for p in theirs) and sorted(report["kept"]) == sorted(str(p) for p in theirs)


def test_cache_dir_that_is_a_file_warns_and_caches_in_memory(env):
    env.cache_dir.write_text("a file")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        with pytest.raises(CacheWarning, match=r"is not a directory.*kernels are cached in memory only"):
            KernelCache(env.cache_dir).get_or_build("ab" * 32, env.record, env.builder())
    with pytest.warns(CacheWarning):
        SAFETY["run"](KernelCache(env.cache_dir).get_or_build("ab" * 32, env.record, env.builder()))
    assert env.cache_dir.read_text() == "a file"


def _claim_new_directory(root: str, results) -> None:
    from tilelang_core.cache.store import DiskCache

    try:
        DiskCache(Path(root)).prepare()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(repr(exc))


def test_processes_claiming_one_new_directory_all_get_it(tmp_path):
    """Eight processes preparing one new cache directory at once: none may find it foreign (a
    partial tag, or the other processes' folders before the tag, once made one of four fail)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    for round_ in range(4):
        root = tmp_path / f"new-{round_}"
        results = context.Queue()
        workers = [context.Process(target=_claim_new_directory, args=(str(root), results)) for _ in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(TIMEOUT)
        assert [results.get(timeout=TIMEOUT) for _ in workers] == ["ok"] * 8
        assert ownership.has_tag(root) and sorted(os.listdir(root)) == ["CACHEDIR.TAG", "kernels", "locks", "tmp"]


def test_cache_dir_with_an_unknown_users_home_names_the_variable(monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", "~no_such_user_for_tilelang/cache")
    with pytest.raises(CacheError, match=r"TILELANG_CACHE_DIR='~no_such_user_for_tilelang/cache': cannot expand '~'"):
        tilelang.cache.cache_dir()
