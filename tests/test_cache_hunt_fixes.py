"""Kernel cache fixes from a bug hunt; each test failed before its fix.

* ``tilelang cache clear`` / ``prune`` on a cache that cannot be written said "removed N" and
  exited 0 with everything still there (``_trash`` fell back to ``shutil.rmtree(ignore_errors=True)``,
  which also emptied the entry file by file when only its shard was immutable). Now only what is
  gone is counted, the rest is named on stderr with why, and the command exits 1.
* Entries another tilelang-core wrote (another format version, a metadata field this one does not
  know) were listed "(unreadable)" and pruned whatever ``--days``; now they have rows of their own
  and go only when unused.
* A ``clear`` running beside a compile deleted the entry it was writing in ``tmp/`` (the writer
  warned "could not be saved ... No such file or directory"); now what a running process, or any
  process in the last minutes, is writing is kept.
* ``TILELANG_CACHE_DIR`` as a symbolic link in a loop made every compile raise ``CacheError``, a
  link to nothing warned "File exists", and ``info`` / ``clear`` said nothing; now compile caches
  in memory with a warning naming the link, ``info`` warns, ``clear`` and ``prune`` exit 1.
* ``tilelang cache info`` printed a location holding a line break on two lines.

Kernels are real compiles (``target="c"``, ``execution_backend="cython"``); the command line runs
in real subprocesses.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.cache import CacheWarning
from tilelang_core.cache import entry as E

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vadd_kernel import N, vadd as _vadd  # noqa: E402

TIMEOUT = 120  # seconds for one command-line run or a writer subprocess


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh cache directory, named by ``TILELANG_CACHE_DIR`` (subprocesses inherit it)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    return root


def compile_vadd():
    """The vector addition, compiled through the cache of ``$TILELANG_CACHE_DIR``."""
    return tilelang.compile(_vadd(), out_idx=-1, target="c", execution_backend="cython")


def saved_entry(cache_dir: Path) -> Path:
    """Compile the vector addition into ``cache_dir``; its entry folder."""
    kernel = compile_vadd()
    entry = cache_dir / "kernels" / kernel.cache_key[:2] / kernel.cache_key
    assert (entry / E.META_FILE).is_file()
    return entry


def works(kernel) -> None:
    a, b = torch.randn(N), torch.randn(N)
    torch.testing.assert_close(kernel(a, b), a + b)


def cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m tilelang cache <args>`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "tilelang", "cache", *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def immutable(path: Path, undo: Path):
    """``chattr +i path`` (root ignores permission bits, not this) for the block; ``chattr -R -i undo``
    afterwards, whatever moved where. Skips when the file system or the system has no chattr."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available: no way to make a folder unwritable for root")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-R", "-i", str(undo)], capture_output=True)


# -- 1. what cannot be removed is not counted, is named, and the command exits 1 -----------------


def test_clear_and_prune_of_a_cache_that_cannot_be_written_say_so_and_exit_1(cache_dir):
    entry = saved_entry(cache_dir)
    before = contents(entry)
    with immutable(entry.parent, cache_dir):
        for args in (("clear",), ("prune", "--days", "0")):
            out = cli(*args)
            assert out.returncode == 1, (args, out.stdout, out.stderr)
            assert "removed 0 cached kernels" in out.stdout, out.stdout
            assert f"cannot move {entry} into {cache_dir / 'tmp'} to delete it: Operation not permitted" in out.stderr
            assert "the entry was left whole" in out.stderr and f"run `tilelang cache {args[0]}` again" in out.stderr
        assert contents(entry) == before  # whole: not emptied file by file
        with pytest.warns(CacheWarning, match=rf"clear: 1 item could not be removed \(cannot move {entry}"):
            assert tilelang.cache.clear() == 0
    out = cli("clear")  # writable again: it goes, and is counted
    assert out.returncode == 0 and "removed 1 cached kernel from" in out.stdout, out.stderr
    assert not entry.exists()


def test_an_entry_moved_out_but_not_deleted_is_not_counted(cache_dir):
    entry = saved_entry(cache_dir)
    with immutable(entry / "backend", cache_dir):
        out = cli("clear")
        assert out.returncode == 1 and "removed 0 cached kernels" in out.stdout, (out.stdout, out.stderr)
        assert f"{entry} was moved to {cache_dir / 'tmp'}/trash." in out.stderr and "but not deleted" in out.stderr
        assert "Operation not permitted" in out.stderr
        again = cli("clear")  # the trash is still there: said again, not counted
        assert again.returncode == 1 and "/backend/" in again.stderr, again.stderr
    assert cli("clear").returncode == 0
    assert not list((cache_dir / "tmp").iterdir())


# -- 2. entries another tilelang-core wrote are not "unreadable" ---------------------------------


@pytest.mark.parametrize("change", [{"format_version": 2, "new_field": 1}, {"new_field": 1}],
                         ids=["format-2-and-a-new-field", "a-new-field"])
def test_entries_of_another_tilelang_core_are_listed_apart_and_pruned_by_age_only(cache_dir, change):
    entry = saved_entry(cache_dir)
    meta = json.loads((entry / E.META_FILE).read_text())
    (entry / E.META_FILE).write_text(json.dumps({**meta, **change}))
    corrupt = entry.parent / (entry.parent.name + "c" * 62)
    shutil.copytree(entry, corrupt)
    (corrupt / E.META_FILE).write_text('{"format": "tilelang-ker')
    row = f"(written by tilelang-core {meta['core_version']}, format {change.get('format_version', 1)})"

    text = cli("info").stdout
    assert f"  {row}" in text and "not corrupt: another tilelang-core wrote them" in text, text
    assert "(unreadable)                  1 entries" in text and "corrupt: never loaded" in text, text
    rows = json.loads(cli("info", "--json").stdout)["backends"]
    assert rows[row]["entries"] == 1 and rows[row]["other_core"] is True and rows["(unreadable)"]["entries"] == 1

    out = cli("prune", "--days", "30")
    assert out.returncode == 0 and "removed 1 cached kernel" in out.stdout and "1 unreadable" in out.stdout, out
    assert "kept 1 cached kernel of another tilelang-core" in out.stdout
    assert entry.is_dir() and not corrupt.exists()
    old = time.time() - 40 * 86400
    os.utime(entry, (old, old))
    out = cli("prune", "--days", "30")
    assert out.returncode == 0 and "1 not used in 30 days" in out.stdout and not entry.exists(), out.stdout


# -- 3. clear leaves alone what another process is writing ---------------------------------------

PAUSED_WRITER = """
import json, os, sys, time, warnings
sys.path.insert(0, {tests!r})
import tilelang
from tilelang_core.cache import entry as E
from vadd_kernel import vadd
go, original = {go!r}, E.write_entry

def paused(directory, *args, **kwargs):
    print("writing", directory, flush=True)
    while not os.path.exists(go):
        time.sleep(0.05)
    return original(directory, *args, **kwargs)

E.write_entry = paused
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = tilelang.compile(vadd(), out_idx=-1, target="c", execution_backend="cython")
print(json.dumps({{"key": kernel.cache_key, "warnings": [str(w.message) for w in caught]}}))
"""


def test_clear_keeps_what_a_running_process_is_writing(cache_dir, tmp_path):
    go = tmp_path / "go"
    code = PAUSED_WRITER.format(tests=str(Path(__file__).resolve().parent), go=str(go))
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = writer.stdout.readline()
        assert line.startswith("writing "), line + writer.stderr.read()
        being_written = Path(line.split(" ", 1)[1].strip())
        assert being_written.parent == cache_dir / "tmp" and f".{writer.pid}." in being_written.name
        old = time.time() - 600  # past the few minutes: only the running writer's id keeps it
        os.utime(being_written, (old, old))
        out = cli("clear")
        assert out.returncode == 0, out.stderr
        assert f"kept {being_written} (process {writer.pid}, which is still running, is writing it)" in out.stdout
        assert being_written.is_dir()
    finally:
        go.touch()
        stdout, stderr = writer.communicate(timeout=TIMEOUT)
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["warnings"] == [], result  # before: "could not be saved ... No such file or directory"
    key = result["key"]
    assert (cache_dir / "kernels" / key[:2] / key / E.META_FILE).is_file()


def test_clear_keeps_fresh_leftovers_of_any_process_and_removes_old_ones_of_ended_ones(cache_dir):
    saved_entry(cache_dir)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    pid = int(ended.stdout)  # ended: its id says nothing (another container's writer could have it)
    leftover = cache_dir / "tmp" / f"{'ab' * 32}.{pid}.0badcafe"
    leftover.mkdir()
    (leftover / "artifact.json").write_text("{}")
    out = cli("clear")
    assert out.returncode == 0 and f"kept {leftover} (written " in out.stdout, out.stdout
    assert leftover.is_dir()
    old = time.time() - 600
    os.utime(leftover, (old, old))
    out = cli("clear")
    assert out.returncode == 0 and str(leftover) not in out.stdout and not leftover.exists(), out.stdout


# -- 4. a cache directory that is a link in a loop or to nothing ---------------------------------


def _link_loop(tmp_path: Path) -> tuple[Path, str]:
    a, b = tmp_path / "loop-a", tmp_path / "loop-b"
    a.symlink_to(b)
    b.symlink_to(a)
    return a, f"{a} is a symbolic link in a loop ({a} -> {b} -> {a})"


def _link_to_nothing(tmp_path: Path) -> tuple[Path, str]:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing")
    return link, f"{link} is a symbolic link to {tmp_path / 'missing'}, which does not exist; create"


@pytest.mark.parametrize("make", [_link_loop, _link_to_nothing], ids=["loop", "to-nothing"])
def test_a_cache_dir_link_in_a_loop_or_to_nothing_caches_in_memory_and_the_cli_says_so(tmp_path, monkeypatch, make):
    link, said = make(tmp_path)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(link))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        works(compile_vadd())  # before: CacheError (loop), or a warning "File exists" (to nothing)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert any(said in m and "cached in memory only" in m for m in messages), messages
    info = cli("info")
    assert info.returncode == 0 and f"warning:  kernel cache directory {link}: {said}" in info.stdout, info.stdout
    for args in (("clear",), ("prune",)):
        out = cli(*args)
        assert out.returncode == 1 and said in out.stderr and "removed" not in out.stdout, (args, out)
    assert not (tmp_path / "missing").exists()


# -- 5. a location with a line break -------------------------------------------------------------


def test_info_prints_a_location_with_a_line_break_on_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "new\nline"))
    out = cli("info")
    assert out.returncode == 0 and out.stdout.splitlines()[0] == f"location: {tmp_path}/new line", out.stdout
    assert json.loads(cli("info", "--json").stdout)["location"] == str(tmp_path / "new\nline")
