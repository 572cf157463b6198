"""The kernel cache never deletes what it did not make, never loads what others control, and
copes with a full disk and broken entries (issue #11 §1, §2, §4).

Kernels come from the throwaway backend ``pyadd`` (see test_cache_kit.py) through its real
hooks and real files; a case that could hang (a FIFO, /dev/zero) runs in a subprocess with a
timeout, so a regression fails instead of hanging the suite. Mode checks read ``stat`` bits, so
they are exercised as root too.
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tilelang
from tilelang_core.cache import CacheWarning, get_cache
from tilelang_core.cache import entry as E
from tilelang_core.cache.store import KernelCache
from tilelang_core.errors import CacheError

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))
TIMEOUT = 90  # seconds for a subprocess that would hang without the fix


@pytest.fixture
def env(tmp_path, monkeypatch):
    yield from KIT["cache_env"](tmp_path, monkeypatch)


def key_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fresh(env) -> KernelCache:
    return KernelCache(env.cache_dir)


def run(kernel):
    import torch

    a, b = torch.arange(16, dtype=torch.float32), torch.ones(16)
    assert torch.equal(kernel(a, b), a + b)


def saved_entry(env, name="k") -> Path:
    fresh(env).get_or_build(key_of(name), env.record, env.builder())
    return fresh(env).disk.entry_dir(key_of(name))


def user_folder(tmp_path: Path) -> Path:
    """A folder of the user's, shaped like cache shards so a link-following clear would eat it."""
    d = tmp_path / "precious"
    (d / "ab").mkdir(parents=True)
    (d / "ab" / "notes.txt").write_text("keep me")
    (d / ("cd" * 32)).mkdir()
    (d / ("cd" * 32) / "thesis.tex").write_text("keep me too")
    (d / "top.txt").write_text("and me")
    return d


def tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# --- §1: clear removes only what the cache made -----------------------------------------------


def test_clear_unlinks_a_kernels_folder_that_is_a_link_and_never_follows_it(env):
    saved_entry(env)
    user = user_folder(env.tmp)
    before = tree(user)
    kernels = env.cache_dir / "kernels"
    import shutil

    shutil.rmtree(kernels)
    kernels.symlink_to(user, target_is_directory=True)
    with pytest.raises(CacheError, match=r"kernels is a symbolic link, not a directory.*tilelang cache clear"):
        fresh(env).get_or_build(key_of("k"), env.record, env.builder())  # never loads from or saves into it
    assert tilelang.cache.clear() == 0
    assert tree(user) == before
    assert not kernels.is_symlink()
    run(get_cache().get_or_build(key_of("again"), env.record, env.builder()))  # the cache works again
    assert kernels.is_dir() and not kernels.is_symlink()


def test_clear_unlinks_a_locks_folder_that_is_a_link_and_never_follows_it(env):
    """clear unlinked idle ``<key>.lock`` files through a ``locks`` link: a file of the user's with
    such a name went, and the link stayed, so the cache stayed unusable (clear was the remedy the
    error named)."""
    saved_entry(env)
    user = user_folder(env.tmp)
    (user / (key_of("x") + ".lock")).write_text("a user's file with a lock file's name")
    before = tree(user)
    locks = env.cache_dir / "locks"
    import shutil

    shutil.rmtree(locks)
    locks.symlink_to(user, target_is_directory=True)
    with pytest.raises(CacheError, match=r"locks is a symbolic link, not a directory.*tilelang cache clear"):
        fresh(env).get_or_build(key_of("k2"), env.record, env.builder())
    report = get_cache().clear_report()
    assert tree(user) == before and not os.path.lexists(locks)
    assert str(locks) in report["removed_junk"]
    run(get_cache().get_or_build(key_of("again"), env.record, env.builder()))  # the cache works again
    shutil.rmtree(locks)
    locks.symlink_to(user, target_is_directory=True)
    tilelang.cache.prune(0)  # prune does not follow it either
    assert tree(user) == before


def test_prune_never_moves_entries_through_a_tmp_link(env):
    """prune renamed the entries it removes into tmp/trash.<id> through a tmp/ link, into a folder
    of the user's, and deleted them there (a failed delete left them in that folder)."""
    entry = saved_entry(env)
    user = user_folder(env.tmp)
    before = tree(user)
    tmp = env.cache_dir / "tmp"
    import shutil

    shutil.rmtree(tmp)
    tmp.symlink_to(user, target_is_directory=True)
    moved = []
    real_rename = os.rename
    try:
        os.rename = lambda src, dst, *a, **k: (moved.append(str(dst)), real_rename(src, dst, *a, **k))[1]
        tilelang.cache.prune(0)
    finally:
        os.rename = real_rename
    assert not entry.exists() and tree(user) == before
    assert not [m for m in moved if m.startswith(str(tmp))]


@pytest.mark.parametrize("sub", ["kernels", "locks"])
def test_a_file_in_place_of_a_cache_folder_is_named_with_a_remedy_that_works(env, sub):
    """clear keeps regular files it did not make, so 'Run tilelang cache clear' did not help."""
    saved_entry(env)
    import shutil

    folder = env.cache_dir / sub
    shutil.rmtree(folder)
    folder.write_text("someone's notes")
    with pytest.raises(CacheError, match=rf"{sub} is a regular file, where the cache keeps its {sub}/ folder.*"
                                         r"Move or delete it"):
        fresh(env).get_or_build(key_of("k2"), env.record, env.builder())
    report = get_cache().clear_report()
    assert folder.read_text() == "someone's notes" and str(folder) in report["kept"]
    with pytest.warns(CacheWarning, match=rf"kept {folder} \(the cache did not make it\), so the cache cannot be used"):
        tilelang.cache.clear()  # it returned as if all was well
    folder.unlink()
    run(fresh(env).get_or_build(key_of("k2"), env.record, env.builder()))


@pytest.mark.parametrize("sub,what", [("locks", "a regular file"), ("tmp", "a symbolic link")])
def test_info_names_a_cache_folder_that_is_not_a_folder(env, sub, what, capsys):
    """`tilelang cache info` showed a cache whose every compile failed as a healthy one."""
    saved_entry(env)
    import shutil

    folder = env.cache_dir / sub
    shutil.rmtree(folder)
    if sub == "tmp":
        folder.symlink_to(user_folder(env.tmp), target_is_directory=True)
    else:
        folder.write_text("someone's notes")
    (problem,) = tilelang.cache.info()["problems"]
    assert f"{folder} is {what}" in problem
    from tilelang_core.cli import main

    assert main(["cache", "info"]) == 0
    assert f"warning:  kernel cache folder {folder} is {what}" in capsys.readouterr().out
    if sub == "tmp":
        tilelang.cache.clear()  # unlinks it
    else:
        folder.unlink()
    assert tilelang.cache.info()["problems"] == []


def test_clear_unlinks_a_shard_that_is_a_link_and_never_follows_it(env):
    entry = saved_entry(env)
    user = user_folder(env.tmp)
    before = tree(user)
    link = entry.parent.parent / "ee"
    link.symlink_to(user, target_is_directory=True)
    assert tilelang.cache.clear() == 1
    assert tree(user) == before
    assert not os.path.lexists(link) and not entry.exists()


def test_info_reports_junk_apart_from_entries_and_clear_unlinks_links_but_keeps_files(env):
    entry = saved_entry(env)
    user = user_folder(env.tmp)
    before = tree(user)
    kernels, shard = env.cache_dir / "kernels", entry.parent
    (kernels / "README").write_text("a file")
    (kernels / "zz").symlink_to(user, target_is_directory=True)
    os.mkfifo(kernels / "fifo")
    (shard / "junk.txt").write_text("a file in a shard")
    (shard / (shard.name + "0" * 62)).symlink_to(user, target_is_directory=True)  # a link named like an entry
    (kernels / "mine").mkdir()
    (kernels / "mine" / "data.bin").write_bytes(b"a folder the cache did not make")

    data = tilelang.cache.info()
    assert data["entries"] == 1 and data["backends"] == {"pyadd 1.0.0": {"entries": 1, "bytes": data["bytes"], "compiled_at_load": 0,
                                                                      "installed": "1.0.0"}}
    kinds = {Path(j["path"]).name: j["kind"] for j in data["junk"]}
    assert kinds == {
        "README": "a regular file",
        "zz": "a symbolic link",
        "fifo": "a FIFO",
        "junk.txt": "a regular file",
        shard.name + "0" * 62: "a symbolic link",
        "mine": "a directory",
    }
    cli = [sys.executable, "-m", "tilelang", "cache"]
    as_json = json.loads(subprocess.run([*cli, "info", "--json"], capture_output=True, text=True, check=True,
                                        timeout=TIMEOUT).stdout)
    assert as_json["entries"] == 1 and len(as_json["junk"]) == 6
    text = subprocess.run([*cli, "info"], capture_output=True, text=True, check=True, timeout=TIMEOUT).stdout
    assert "entries:  1" in text and "junk:     6 items the cache did not make" in text
    assert f"{kernels / 'zz'} (a symbolic link)" in text

    out = subprocess.run([*cli, "clear"], capture_output=True, text=True, check=True, timeout=TIMEOUT).stdout
    assert "removed 1 cached kernel" in out and f"unlinked {kernels / 'zz'}" in out and "kept" in out
    assert tree(user) == before
    assert f"unlinked {kernels / 'fifo'}" in out and f"kept {kernels / 'README'}" in out
    # links and the FIFO go; the user's folder and plain files are kept (the cache writes neither there)
    assert sorted(p.name for p in kernels.iterdir()) == sorted(["README", "mine", shard.name])
    assert (kernels / "mine" / "data.bin").exists()
    assert (kernels / "README").read_text() == "a file" and (shard / "junk.txt").read_text() == "a file in a shard"
    assert sorted((Path(j["path"]).name, j["kind"]) for j in tilelang.cache.info()["junk"]) == [
        ("README", "a regular file"), ("junk.txt", "a regular file"), ("mine", "a directory")]


# --- §2: the way to the cache directory ---------------------------------------------------------


def _private_target(env) -> Path:
    target = env.tmp / "private" / "cache"
    target.mkdir(parents=True, mode=0o700)
    return target


def test_cache_dir_link_inside_a_folder_others_can_write_is_refused(env, monkeypatch):
    target = _private_target(env)
    shared = env.tmp / "shared"
    shared.mkdir()
    (shared / "cache").symlink_to(target, target_is_directory=True)
    os.chmod(shared, 0o777)  # no sticky bit: anyone could point the link elsewhere
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(shared / "cache"))
    with pytest.raises(CacheError, match=r"reached through .*shared, which other users can write to \(mode 0o777, "
                                         r"no sticky bit\)"):
        get_cache().get_or_build(key_of("x"), env.record, env.builder())
    assert env.builds() == []


def test_cache_dir_link_whose_target_passes_a_folder_others_can_write_is_refused(env, monkeypatch):
    shared = env.tmp / "shared"
    (shared / "deep").mkdir(parents=True)
    os.chmod(shared, 0o777)
    mine = env.tmp / "mine"
    mine.mkdir(mode=0o700)
    (mine / "cache").symlink_to(shared / "deep" / "cache")  # the link is private, its target's way is not
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(mine / "cache"))
    with pytest.raises(CacheError, match="which other users can write to"):
        get_cache().get_or_build(key_of("x"), env.record, env.builder())
    assert not (shared / "deep" / "cache").exists(), "nothing is created before the check"


def test_cache_dir_link_in_a_sticky_folder_of_ours_is_accepted(env, monkeypatch):
    target = _private_target(env)
    sticky = env.tmp / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # like /tmp
    (sticky / "cache").symlink_to(target, target_is_directory=True)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(sticky / "cache"))
    run(get_cache().get_or_build(key_of("x"), env.record, env.builder()))
    assert (target / "kernels").is_dir()


@pytest.mark.skipif(not hasattr(os, "lchown") or os.geteuid() != 0, reason="needs root to chown")
def test_cache_dir_link_of_another_user_in_a_sticky_folder_is_refused(env, monkeypatch):
    target = _private_target(env)
    sticky = env.tmp / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    (sticky / "cache").symlink_to(target, target_is_directory=True)
    os.lchown(sticky / "cache", 12345, 12345)  # they made the link, so they can repoint it
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(sticky / "cache"))
    with pytest.raises(CacheError, match=r"belongs to another user \(uid 12345\) in the shared directory"):
        get_cache().get_or_build(key_of("x"), env.record, env.builder())


# --- §2: every folder and file kernels are loaded from -------------------------------------------


@pytest.mark.parametrize("where, mode", [
    ("kernels", 0o777), ("shard", 0o770), ("entry", 0o707), ("entry/backend", 0o770),
    ("entry/backend/kernel.so", 0o666), ("entry/tilelang-kernel.json", 0o664),
])
def test_cache_folders_or_files_others_can_write_are_refused(env, where, mode):
    entry = saved_entry(env)
    path = {"kernels": env.cache_dir / "kernels", "shard": entry.parent}.get(where)
    if path is None:
        path = entry / where.split("/", 1)[1] if "/" in where else entry
    os.chmod(path, mode)
    with pytest.raises(CacheError, match=rf"{path} is writable by other users.*\(mode {oct(mode)}\).*native code"):
        fresh(env).get_or_build(key_of("k"), env.record, env.builder())
    assert len(env.builds()) == 1 and env.loads() == [], "neither loaded nor rebuilt over it"


@pytest.mark.skipif(not hasattr(os, "chown") or os.geteuid() != 0, reason="needs root to chown")
def test_cache_entry_of_another_user_is_refused(env):
    entry = saved_entry(env)
    os.chown(entry / "backend", 12345, 12345)
    with pytest.raises(CacheError, match=r"backend belongs to another user \(uid 12345\)"):
        fresh(env).get_or_build(key_of("k"), env.record, env.builder())


def test_entries_are_written_without_group_or_other_write_bits(env):
    old = os.umask(0o002)  # a common umask: group-writable files by default
    try:
        entry = saved_entry(env)
    finally:
        os.umask(old)
    for path in [entry, *entry.rglob("*")]:
        assert stat.S_IMODE(path.lstat().st_mode) & 0o022 == 0, path
    run(fresh(env).get_or_build(key_of("k"), env.record, env.builder()))  # and it loads back
    assert len(env.builds()) == 1


# --- §2: exactly the listed files, regular files only -------------------------------------------


def _rewrite_meta(entry: Path, change) -> None:
    meta = json.loads((entry / E.META_FILE).read_text())
    change(meta)
    (entry / E.META_FILE).write_text(json.dumps(meta))


def _rebuilt_with_warning(env, match):
    with pytest.warns(CacheWarning, match=match):
        run(fresh(env).get_or_build(key_of("k"), env.record, env.builder()))
    assert len(env.builds()) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        run(fresh(env).get_or_build(key_of("k"), env.record, env.builder()))
    assert len(env.builds()) == 2


def test_metadata_listing_no_files_does_not_skip_verification(env):
    entry = saved_entry(env)
    _rewrite_meta(entry, lambda m: m.update(files={}))
    _rebuilt_with_warning(env, "does not list artifact.json")


def test_unlisted_file_in_an_entry_is_refused(env):
    entry = saved_entry(env)
    (entry / "backend" / "extra.so").write_bytes(b"\x7fELF not listed anywhere")
    _rebuilt_with_warning(env, r"holds files its metadata does not list \(backend/extra.so\)")


def test_listed_file_replaced_by_a_link_is_refused(env):
    entry = saved_entry(env)
    lib = entry / "backend" / "kernel.so"
    copy = env.tmp / "copy.so"
    copy.write_bytes(lib.read_bytes())  # same bytes, same digest: only the link gives it away
    lib.unlink()
    lib.symlink_to(copy)
    _rebuilt_with_warning(env, "is a symbolic link")


FIFO_COMPILE = """
import json, warnings, runpy
from tilelang_core.backends import get_registry
from tilelang_core.cache import get_cache
from tilelang_core.jit.compile import build_kernel
kit = runpy.run_path({kit!r})
record = get_registry().get("pyadd")
build = lambda: build_kernel(record, record.spec.targets["c"], kit["add_artifact"]("vadd"), -1, [], None, False, "c")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = get_cache().get_or_build({key!r}, record, build)
print(json.dumps({{"name": kernel.name, "warnings": [str(w.message) for w in caught]}}))
"""


def test_fifo_in_place_of_the_metadata_hangs_neither_info_nor_compile(env):
    entry = saved_entry(env)
    (entry / E.META_FILE).unlink()
    os.mkfifo(entry / E.META_FILE)
    penv = KIT["subprocess_env"](env.site)
    info = subprocess.run([sys.executable, "-m", "tilelang", "cache", "info", "--json"], capture_output=True,
                          text=True, env=penv, timeout=TIMEOUT)
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["entries"] == 1 and "(unreadable)" in data["backends"]
    code = FIFO_COMPILE.format(kit=str(Path(__file__).with_name("test_cache_kit.py")), key=key_of("k"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=penv, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["name"] == "vadd"
    assert any("is a FIFO, not a regular file" in w for w in result["warnings"]), result
    assert stat.S_ISREG(os.lstat(entry / E.META_FILE).st_mode), "the entry is rebuilt"


# --- §4: disk full, missing metadata ------------------------------------------------------------------

DISK_FULL = """
import json, resource, runpy, signal, warnings
import torch
from tilelang_core.backends import get_registry
from tilelang_core.cache import get_cache
from tilelang_core.jit.compile import build_kernel
kit = runpy.run_path({kit!r})
record = get_registry().get("pyadd")
build = lambda name: (lambda: build_kernel(record, record.spec.targets["c"], kit["add_artifact"](name), -1, [], None,
                                           False, "c"))
get_cache().disk.prepare()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
a = torch.arange(16, dtype=torch.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = get_cache().get_or_build({k1!r}, record, build("first"))
    second = get_cache().get_or_build({k2!r}, record, build("second"))
    again = get_cache().get_or_build({k1!r}, record, build("first"))
print(json.dumps({{"ok": bool(torch.equal(first(a, a), a + a) and torch.equal(second(a, a), a + a)),
                  "memory_hit": again is first, "status": record.status,
                  "warnings": [f"{{type(w.message).__name__}}: {{w.message}}" for w in caught]}}))
"""


def test_disk_full_during_save_warns_and_keeps_the_kernel_in_memory(env):
    code = DISK_FULL.format(kit=str(Path(__file__).with_name("test_cache_kit.py")), k1=key_of("f1"), k2=key_of("f2"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=KIT["subprocess_env"](env.site), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["memory_hit"] and result["status"] == "ok", result
    saves = [w for w in result["warnings"] if "could not be saved" in w]
    assert len(saves) == 2 and all(w.startswith("CacheWarning") and "File too large" in w and "memory only" in w
                                   for w in saves), result
    assert not any("broken" in w for w in result["warnings"])
    assert not list((env.cache_dir / "tmp").iterdir()), "no half-written entry is left"
    assert not list((env.cache_dir / "kernels").rglob(E.META_FILE))


def test_entry_without_its_metadata_is_removed_rebuilt_and_saved(env):
    entry = saved_entry(env)
    (entry / E.META_FILE).unlink()
    _rebuilt_with_warning(env, "its metadata file tilelang-kernel.json is missing")
    assert (entry / E.META_FILE).is_file()


def test_file_where_an_entry_folder_should_be_is_replaced(env):
    entry = saved_entry(env)
    import shutil

    shutil.rmtree(entry)
    entry.write_text("not an entry")
    _rebuilt_with_warning(env, "it is a regular file, not an entry folder")
    assert (entry / E.META_FILE).is_file()
    assert not list((env.cache_dir / "tmp").iterdir())


CYTHON_DISK_FULL = """
import json, os, resource, runpy, signal, warnings
os.environ["TILELANG_DISABLE_CACHE"] = "1"  # build first, then fill the disk, then save
import torch, tilelang
from tilelang_core.backends import get_registry
from tilelang_core.cache import get_cache
kit = runpy.run_path({kit!r})
kernel = tilelang.compile(kit["make_prim_func"]("full", 4096), out_idx=-1, execution_backend="cython", target="c")
record = get_registry().get("cython")
cache = get_cache()
cache.disk.prepare()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    saved = cache.disk.save({key!r}, kernel, record)
a = torch.arange(4096, dtype=torch.float32)
print(json.dumps({{"saved": saved, "status": record.status, "ok": bool(torch.equal(kernel(a, a), a + a)),
                  "warnings": [f"{{type(w.message).__name__}}: {{w.message}}" for w in caught]}}))
"""


def _cython_usable() -> bool:
    from tilelang_core.backends import get_registry

    record = get_registry().get("cython")
    return record is not None and record.usable and get_registry().probe(record, "c").available


@pytest.mark.slow
@pytest.mark.skipif(not _cython_usable(), reason="tilelang-backend-cython is not installed/available")
def test_disk_full_while_cython_saves_warns_and_keeps_the_backend(tmp_path, monkeypatch):
    """The real cython save hook copying its library into a full disk (EFBIG from RLIMIT_FSIZE)."""
    pytest.importorskip("tilelang_core.lowering")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    code = CYTHON_DISK_FULL.format(kit=str(Path(__file__).with_name("test_cache_kit.py")), key=key_of("full"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["saved"] is False and result["status"] == "ok" and result["ok"], result
    assert any(w.startswith("CacheWarning") and "File too large" in w for w in result["warnings"]), result
    assert not list((tmp_path / "cache" / "tmp").iterdir())


def lock_path(env, name="k") -> Path:
    return env.cache_dir / "locks" / f"{key_of(name)}.lock"


def test_a_link_in_place_of_a_lock_file_is_replaced_never_followed(env, tmp_path):
    fresh(env).disk.prepare()
    outside = tmp_path / "user" / "notes.txt"
    outside.parent.mkdir()
    lock_path(env).symlink_to(outside)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a link in locks/ is replaced quietly
        run(fresh(env).get_or_build(key_of("k"), env.record, env.builder()))
    assert not outside.exists(), "the lock was created through the link, outside the cache"
    assert lock_path(env).is_file() and not lock_path(env).is_symlink()
    outside.write_text("mine")
    lock_path(env).unlink()
    lock_path(env).symlink_to(outside)
    run(fresh(env).get_or_build(key_of("k2"), env.record, env.builder()))  # another key: this link stays
    with fresh(env).disk.lock(key_of("k")):
        pass
    assert outside.read_text() == "mine"


def test_a_lock_file_that_cannot_be_made_warns_and_the_kernel_still_builds_and_saves(env):
    fresh(env).disk.prepare()
    lock_path(env).mkdir()  # a folder where the lock file goes (a tool's leftover)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(fresh(env).get_or_build(key_of("k"), env.record, env.builder()))
    texts = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(texts) == 1 and "lock file for key" in texts[0] and "Is a directory" in texts[0], texts
    assert (fresh(env).disk.entry_dir(key_of("k")) / E.META_FILE).is_file()
    assert lock_path(env).is_dir()


def test_an_interrupted_save_leaves_nothing_in_tmp_and_the_next_one_saves(env, monkeypatch):
    """Before, Ctrl-C while an entry was written left its half-written folder in tmp/ (3 of 20
    interrupts of a tvm_ffi save), invisible to `cache info`, for a day."""
    real_write = E.write_entry

    def interrupted(tmp, *args, **kwargs):
        (tmp / "half-written").write_text("...")
        raise KeyboardInterrupt

    monkeypatch.setattr(E, "write_entry", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fresh(env).get_or_build(key_of("k"), env.record, env.builder())
    assert list((env.cache_dir / "tmp").iterdir()) == []
    monkeypatch.setattr(E, "write_entry", real_write)
    assert saved_entry(env).is_dir()
