"""The kernel cache's store: memory and disk layers, atomic entries, locking, fault injection.

Kernels come from the throwaway backend ``pyadd`` (see test_cache_kit.py), built from
hand-written artifacts through the backend's real build/save/load hooks and real files.
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import shutil
import stat
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from tilelang_core.backends import get_registry
from tilelang_core.cache import CacheWarning, active_cache, get_cache
from tilelang_core.cache import entry as E
from tilelang_core.cache.store import KernelCache
from tilelang_core.errors import CacheError

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))


def key_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """pyadd installed, a private cache dir, build/load logs; yields a namespace."""
    yield from KIT["cache_env"](tmp_path, monkeypatch)


def fresh(env) -> KernelCache:
    """A cache with an empty memory layer over the same directory (like a new process)."""
    return KernelCache(env.cache_dir)


def run(kernel):
    import torch

    a, b = torch.arange(16, dtype=torch.float32), torch.ones(16)
    out = kernel(a, b)
    assert torch.equal(out, a + b)


def test_miss_builds_and_saves_then_disk_and_memory_hits(env):
    key = key_of("k1")
    cache = fresh(env)
    k1 = cache.get_or_build(key, env.record, env.builder())
    assert len(env.builds()) == 1
    assert cache.get_or_build(key, env.record, env.builder()) is k1  # memory layer
    k2 = fresh(env).get_or_build(key, env.record, env.builder())  # disk layer
    assert len(env.builds()) == 1 and len(env.loads()) == 1
    assert k2.name == "vadd" and k2.out_idx == [2] and k2.backend.name == "pyadd"
    run(k2)
    entry = cache.disk.entry_dir(key)
    assert sorted(p.name for p in entry.iterdir()) == ["artifact.json", "backend", "tilelang-kernel.json"]
    meta = json.loads((entry / "tilelang-kernel.json").read_text())
    assert meta["key"] == key and meta["backend"]["name"] == "pyadd" and set(meta["files"]) == {
        "artifact.json",
        "backend/kernel.so",
        "backend/manifest.json",
    }
    assert not list((env.cache_dir / "tmp").iterdir()), "temporary directories are left behind"
    for path in env.cache_dir.rglob("*"):
        assert path.suffix not in (".pkl", ".pickle")


def test_cache_dir_is_created_private(env):
    old = os.umask(0)
    try:
        fresh(env).get_or_build(key_of("k"), env.record, env.builder())
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(env.cache_dir).st_mode) == 0o700
    for sub in ("kernels", "tmp", "locks"):
        assert stat.S_IMODE(os.stat(env.cache_dir / sub).st_mode) == 0o700


def _entry(env, key):
    return fresh(env).disk.entry_dir(key)


def _rebuilt_after(env, key, damage, match):
    fresh(env).get_or_build(key, env.record, env.builder())
    damage(_entry(env, key))
    with pytest.warns(CacheWarning, match=match):
        kernel = fresh(env).get_or_build(key, env.record, env.builder())
    run(kernel)
    assert len(env.builds()) == 2, "the damaged entry must be rebuilt"
    # and the rebuilt entry is good again
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        run(fresh(env).get_or_build(key, env.record, env.builder()))
    assert len(env.builds()) == 2


def test_truncated_library_is_detected_removed_and_rebuilt(env):
    def truncate(entry):
        lib = entry / "backend" / "kernel.so"
        lib.write_bytes(lib.read_bytes()[:100])

    _rebuilt_after(env, key_of("trunc"), truncate, "truncated")


def test_corrupt_metadata_json_is_rebuilt(env):
    _rebuilt_after(env, key_of("json"), lambda e: (e / E.META_FILE).write_text('{"format": "tilelang-ker'), "metadata")


def test_corrupt_artifact_json_is_rebuilt(env):
    def corrupt(entry):
        text = (entry / E.ARTIFACT_FILE).read_text()
        (entry / E.ARTIFACT_FILE).write_text(text.replace('"float32"', '"float64"', 1))

    _rebuilt_after(env, key_of("art"), corrupt, "corrupt")


def test_other_format_version_entry_is_rebuilt(env):
    def bump(entry):
        meta = json.loads((entry / E.META_FILE).read_text())
        meta["format_version"] = 99
        (entry / E.META_FILE).write_text(json.dumps(meta))

    _rebuilt_after(env, key_of("ver"), bump, "format 99")


def test_backend_refusing_to_load_is_rebuilt(env):
    """The core's digests pass (we update them), but the backend's own check fails."""

    def tamper(entry):
        lib = entry / "backend" / "kernel.so"
        lib.write_bytes(b"X" * lib.stat().st_size)
        meta = json.loads((entry / E.META_FILE).read_text())
        meta["files"]["backend/kernel.so"]["sha256"] = hashlib.sha256(lib.read_bytes()).hexdigest()
        (entry / E.META_FILE).write_text(json.dumps(meta))

    _rebuilt_after(env, key_of("tamper"), tamper, "pyadd: .*corrupt")


def test_entry_deleted_between_check_and_load_is_rebuilt(env, monkeypatch):
    key = key_of("vanish")
    fresh(env).get_or_build(key, env.record, env.builder())
    real_verify = E.verify_files

    def verify_after_delete(directory, meta, **kwargs):
        shutil.rmtree(directory)  # a concurrent `tilelang cache clear`, right after the metadata was read
        return real_verify(directory, meta, **kwargs)

    monkeypatch.setattr(E, "verify_files", verify_after_delete)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # a vanished entry is a plain miss
        kernel = fresh(env).get_or_build(key, env.record, env.builder())
    run(kernel)
    assert len(env.builds()) == 2


def test_foreign_writable_cache_dir_is_refused(env):
    env.cache_dir.mkdir(mode=0o700)
    os.chmod(env.cache_dir, 0o777)
    with pytest.raises(CacheError, match="writable by other users .*mode 0o777.*chmod 700"):
        fresh(env).get_or_build(key_of("x"), env.record, env.builder())
    os.chmod(env.cache_dir, 0o770)
    with pytest.raises(CacheError, match="loading native code from it would run whatever they put there"):
        fresh(env).get_or_build(key_of("x"), env.record, env.builder())
    assert env.builds() == []


def test_cache_dir_under_foreign_writable_parent_is_refused(env, monkeypatch):
    parent = env.tmp / "shared"
    parent.mkdir()
    os.chmod(parent, 0o777)  # no sticky bit: others could swap the cache directory
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(parent / "cache"))
    with pytest.raises(CacheError, match="other users can write to"):
        get_cache().get_or_build(key_of("x"), env.record, env.builder())


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to chown")
def test_cache_dir_of_another_user_is_refused(env):
    env.cache_dir.mkdir(mode=0o700)
    os.chown(env.cache_dir, 12345, 12345)
    with pytest.raises(CacheError, match="belongs to another user"):
        fresh(env).get_or_build(key_of("x"), env.record, env.builder())


def test_unwritable_cache_dir_falls_back_to_memory_with_a_warning(env, monkeypatch):
    blocker = env.tmp / "not-a-dir"
    blocker.write_text("a file where the cache directory's parent should be")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(blocker / "cache"))
    cache = get_cache()
    with pytest.warns(CacheWarning, match="not usable.*memory only"):
        k = cache.get_or_build(key_of("u"), env.record, env.builder())
    run(k)
    assert cache.get_or_build(key_of("u"), env.record, env.builder()) is k
    assert len(env.builds()) == 1


def test_a_save_hook_that_fails_to_build_leaves_the_kernel_in_memory_with_a_warning(env, monkeypatch):
    """A backend's save step may compile (tvm_ffi runs nvcc for CUDA code) and fail with a
    BuildError: the compile that asked still gets its kernel, and no half-written entry or
    temporary folder stays in the cache."""
    monkeypatch.setenv("TL_TEST_SAVE_FAIL", "1")
    with pytest.warns(CacheWarning, match="could not be saved to the cache.*save step failed.*memory only"):
        kernel = fresh(env).get_or_build(key_of("sf"), env.record, env.builder())
    run(kernel)
    assert not list((env.cache_dir / "tmp").iterdir()), "temporary directories are left behind"
    assert not _entry(env, key_of("sf")).exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_cache_dir_falls_back_to_memory(env):  # pragma: no cover - runs as non-root only
    env.cache_dir.mkdir(mode=0o500)
    with pytest.warns(CacheWarning, match="not usable"):
        run(fresh(env).get_or_build(key_of("ro"), env.record, env.builder()))


def test_backend_without_save_load_is_cached_in_memory_only(env):
    record = get_registry().get("memonly")
    cache = fresh(env)
    k = cache.get_or_build(key_of("m"), record, env.builder("vmem", record))
    assert cache.get_or_build(key_of("m"), record, env.builder("vmem", record)) is k
    assert not env.cache_dir.exists() or not any((env.cache_dir / "kernels").rglob(E.META_FILE))
    fresh(env).get_or_build(key_of("m"), record, env.builder("vmem", record))
    assert len(env.builds()) == 2


def test_disable_env_turns_the_cache_off(env, monkeypatch):
    assert active_cache() is not None
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    assert active_cache() is None


def test_clear_and_info(env):
    import tilelang

    cache = get_cache()
    for i in range(3):
        cache.get_or_build(key_of(f"c{i}"), env.record, env.builder(f"k{i}"))
    data = tilelang.cache.info()
    assert data["location"] == str(env.cache_dir) and data["entries"] == 3
    assert data["backends"]["pyadd 1.0.0"]["entries"] == 3 and data["bytes"] > 0
    assert tilelang.cache.clear() == 3
    assert tilelang.cache.info()["entries"] == 0
    cache.get_or_build(key_of("c0"), env.record, env.builder("k0"))
    assert len(env.builds()) == 4, "clear() empties the memory layer too"


def test_cli_info_and_clear(env):
    fresh(env).get_or_build(key_of("cli"), env.record, env.builder())
    tl = [sys.executable, "-m", "tilelang", "cache"]
    penv = {**os.environ}
    out = subprocess.run([*tl, "info", "--json"], capture_output=True, text=True, env=penv, check=True)
    data = json.loads(out.stdout)
    assert data["entries"] == 1 and data["location"] == str(env.cache_dir) and "pyadd 1.0.0" in data["backends"]
    text = subprocess.run([*tl, "info"], capture_output=True, text=True, env=penv, check=True).stdout
    assert f"location: {env.cache_dir}" in text and "entries:  1" in text and "pyadd 1.0.0" in text
    out = subprocess.run([*tl, "clear"], capture_output=True, text=True, env=penv, check=True)
    assert "removed 1 cached kernel from" in out.stdout
    assert json.loads(subprocess.run([*tl, "info", "--json"], capture_output=True, text=True, env=penv).stdout)["entries"] == 0


def test_cli_refuses_foreign_writable_dir(env):
    env.cache_dir.mkdir(mode=0o700)
    os.chmod(env.cache_dir, 0o777)
    out = subprocess.run([sys.executable, "-m", "tilelang", "cache", "clear"], capture_output=True, text=True)
    assert out.returncode == 1 and "writable by other users" in out.stderr


CHILD = """
import os, sys, time
from tilelang_core.backends import get_registry
from tilelang_core.cache import get_cache
from tilelang_core.jit.compile import build_kernel
import runpy
kit = runpy.run_path({kit!r})
record = get_registry().get("pyadd")
build = lambda: build_kernel(record, record.spec.targets["c"], kit["add_artifact"]("race"), -1, [], None, False, "c")
while time.time() < {start}:
    time.sleep(0.005)
kernel = get_cache().get_or_build({key!r}, record, build)
print("ok", kernel.name)
"""


def test_four_processes_compiling_one_key_build_it_once(env):
    key = key_of("race")
    code = CHILD.format(kit=str(Path(__file__).with_name("test_cache_kit.py")), key=key, start=time.time() + 1.5)
    penv = KIT["subprocess_env"](env.site)
    penv["TL_TEST_BUILD_SLEEP"] = "1.0"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=penv)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "ok race"
    assert len(env.builds()) == 1, env.builds()
    assert len(env.loads()) == 3, env.loads()
    run(fresh(env).get_or_build(key, env.record, env.builder("race")))
    assert not list((env.cache_dir / "tmp").iterdir())


def test_threads_call_one_kernel_while_compiling_others(env):
    import torch

    cache = get_cache()
    shared = cache.get_or_build(key_of("shared"), env.record, env.builder("shared"))
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(t):
        try:
            barrier.wait()
            a, b = torch.full((16,), float(t)), torch.ones(16)
            for i in range(6):
                assert torch.equal(shared(a, b), a + b)
                k = cache.get_or_build(key_of(f"t{t}-{i}"), env.record, env.builder(f"t{t}_{i}"))
                assert torch.equal(k(a, b), a + b)
                same = cache.get_or_build(key_of("everyone"), env.record, env.builder("everyone"))
                assert torch.equal(same(b, a), a + b)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    names = [line.split()[1] for line in env.builds()]
    assert names.count("everyone") == 1 and names.count("shared") == 1
    assert len(names) == 2 + 8 * 6


def test_leftovers_of_killed_writers_are_removed_after_a_day(env):
    fresh(env).get_or_build(key_of("a"), env.record, env.builder())
    # named as the cache names what it writes there (<key>.<pid>.<8 hex>); other names are left alone
    old = env.cache_dir / "tmp" / f"{key_of('old')}.123.0000abcd"
    recent = env.cache_dir / "tmp" / f"{key_of('recent')}.456.0000ef01"
    for d in (old, recent):
        d.mkdir()
        (d / "backend").mkdir()
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    fresh(env).get_or_build(key_of("b"), env.record, env.builder())
    assert not old.exists() and recent.exists()


def test_info_says_which_entries_belong_to_a_backend_that_is_not_installed(env):
    import tilelang

    fresh(env).get_or_build(key_of("gone"), env.record, env.builder())
    assert tilelang.cache.info()["backends"]["pyadd 1.0.0"]["installed"] == "1.0.0"
    tl = [sys.executable, "-m", "tilelang", "cache", "info"]
    penv = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pyadd's site is not on this path
    text = subprocess.run(tl, capture_output=True, text=True, env=penv, check=True).stdout
    assert "pyadd 1.0.0" in text and "(not installed: never loaded; `tilelang cache prune` removes them)" in text, text
    data = json.loads(subprocess.run([*tl, "--json"], capture_output=True, text=True, env=penv, check=True).stdout)
    assert data["backends"]["pyadd 1.0.0"]["installed"] is None


@pytest.mark.parametrize("command", ["info", "clear", "prune"])
def test_a_file_as_the_cache_directory_is_reported_and_kept(command, tmp_path):
    """``info`` listed 0 entries without a word and ``clear`` said "removed 0", exit 0."""
    target = tmp_path / "not_a_dir"
    target.write_text("my notes")
    penv = {**os.environ, "TILELANG_CACHE_DIR": str(target)}
    done = subprocess.run([sys.executable, "-m", "tilelang", "cache", command], capture_output=True, text=True, env=penv)
    said = done.stdout + done.stderr
    assert f"{target} is not a directory, so the cache keeps kernels in memory only" in said, said
    assert done.returncode == (0 if command == "info" else 1)
    assert target.read_text() == "my notes"


def test_clear_unlinks_idle_lock_files_and_keeps_a_held_one(env):
    import fcntl

    cache = fresh(env)
    for i in range(3):
        cache.get_or_build(key_of(f"l{i}"), env.record, env.builder(f"l{i}"))
    locks = env.cache_dir / "locks"
    assert len(list(locks.glob("*.lock"))) == 3
    held = locks / f"{key_of('l0')}.lock"
    fd = os.open(held, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process building that key now
    try:
        assert fresh(env).clear() == 3
    finally:
        os.close(fd)
    assert sorted(p.name for p in locks.iterdir()) == [held.name]


def test_clear_keeps_files_in_locks_the_cache_did_not_name(env):
    """Only ``<key>.lock`` files are the cache's: a user's ``deploy.lock`` (a folder laid out like
    a cache, adopted) was unlinked by ``clear``; it stays and is listed as kept."""
    cache = fresh(env)
    cache.get_or_build(key_of("mine"), env.record, env.builder("mine"))
    locks = env.cache_dir / "locks"
    (locks / "deploy.lock").write_text("the pid of my deploy script\n")
    (locks / "notes").write_text("notes\n")
    report = fresh(env).clear_report()
    assert report["entries"] == 1
    assert sorted(p.name for p in locks.iterdir()) == ["deploy.lock", "notes"]
    assert {str(locks / "deploy.lock"), str(locks / "notes")} <= set(report["kept"])


def test_an_interrupted_clear_leaves_whole_entries_and_the_next_clear_finishes(env, monkeypatch):
    from tilelang_core.cache import store

    cache = fresh(env)
    for i in range(3):
        cache.get_or_build(key_of(f"i{i}"), env.record, env.builder(f"i{i}"))
    real_remove, calls = store._remove, []

    def interrupted(path):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_remove(path)

    monkeypatch.setattr(store, "_remove", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fresh(env).clear()
    monkeypatch.undo()
    assert all(p.parent.name == "tmp" and p.name.startswith("trash.") for p in calls)
    info = fresh(env).info()
    assert "(unreadable)" not in info["backends"] and info["entries"] == 1, info
    assert fresh(env).clear() == 1
    assert not list((env.cache_dir / "tmp").iterdir())


def test_ctrl_c_in_a_cache_command_is_one_line_and_status_130(env):
    code = ("import tilelang_core.cache as c, tilelang_core.cli as cli\n"
            "def stop(*a, **k):\n    raise KeyboardInterrupt\n"
            "c.info = stop\nraise SystemExit(cli.main(['cache', 'info']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 130 and out.stderr.strip() == "tilelang: interrupted", out.stderr


def test_a_process_holding_a_build_lock_too_long_is_not_waited_for_forever(env, monkeypatch):
    import fcntl
    import time
    import warnings

    from tilelang_core.errors import SettingError

    cache = fresh(env)
    cache.disk.prepare()
    lock = env.cache_dir / "locks" / f"{key_of('stuck')}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a process stopped (Ctrl-Z) while building this key
    monkeypatch.setenv("TILELANG_CACHE_LOCK_TIMEOUT", "0.5")
    try:
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(cache.get_or_build(key_of("stuck"), env.record, env.builder("stuck")))
        assert time.monotonic() - start < 30
        texts = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
        assert len(texts) == 1 and "another process has been building the kernel of key" in texts[0], texts
        assert "for over 0.5 s" in texts[0] and "TILELANG_CACHE_LOCK_TIMEOUT" in texts[0]
    finally:
        os.close(fd)
    for bad in ("soon", "-1", "1e300"):
        monkeypatch.setenv("TILELANG_CACHE_LOCK_TIMEOUT", bad)
        with pytest.raises(SettingError, match="TILELANG_CACHE_LOCK_TIMEOUT must be a number of seconds"):
            fresh(env).get_or_build(key_of(f"bad{bad}"), env.record, env.builder("bad"))


def test_prune_removes_entries_not_used_lately_and_a_disk_hit_marks_one_used(env):
    import time

    import tilelang

    cache = fresh(env)
    for name in ("old", "used", "new"):
        cache.get_or_build(key_of(name), env.record, env.builder(name))
    long_ago = time.time() - 40 * 86400
    for name in ("old", "used"):
        os.utime(cache.disk.entry_dir(key_of(name)), (long_ago, long_ago))
    fresh(env).get_or_build(key_of("used"), env.record, env.builder("used"))  # a disk hit in a new process
    assert len(env.builds()) == 3
    assert tilelang.cache.prune(30) == {"unused": 1, "not_installed": 0, "unreadable": 0}
    assert not cache.disk.entry_dir(key_of("old")).exists()
    assert cache.disk.entry_dir(key_of("used")).is_dir() and cache.disk.entry_dir(key_of("new")).is_dir()
    assert not list((env.cache_dir / "tmp").iterdir())
    for bad in (-1, float("nan"), "30", True):
        with pytest.raises(ValueError, match="older_than_days must be a number of days >= 0"):
            tilelang.cache.prune(bad)


def test_prune_removes_entries_of_a_backend_that_is_not_installed(env):
    fresh(env).get_or_build(key_of("gone"), env.record, env.builder())
    penv = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pyadd's site is not on this path
    out = subprocess.run([sys.executable, "-m", "tilelang", "cache", "prune"], capture_output=True, text=True,
                         env=penv, check=True).stdout
    assert "removed 1 cached kernel from" in out and "1 of a backend not installed" in out, out
    assert fresh(env).info()["entries"] == 0
