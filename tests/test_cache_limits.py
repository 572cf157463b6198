"""The kernel cache and exports when the environment runs out or refuses (no root needed).

* A cache directory so deep that entry paths pass ``PATH_MAX``: every compile raised a raw
  ``OSError: [Errno 36] File name too long`` (from cleaning up the failed save); now the cache
  says so once (``CacheWarning``) and works in memory.
* ``HOME=""`` made the cache ``/.cache/tilelang`` (``Path.home()`` answers ``/``; created at the
  root of the file system when running as root), a relative ``HOME`` put it under the working
  directory; both now use the user database's home.
* ``kernel.export(path)`` with a name longer than the file system allows wrote the whole export
  beside ``path`` and then failed renaming it, with a raw ``OSError``; a path too deep left the
  folders made on the way; a full disk (here: a file-size limit, ``RLIMIT_FSIZE``) raised an
  ``OSError`` that named a hidden temporary path, or no path at all. Now: refused before anything
  is written, nothing left behind, and the error names the export and the cause.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import warnings
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.cache import CacheWarning
from tilelang_core.cache.location import default_cache_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vadd_kernel import N, vadd as _vadd  # noqa: E402


def _works(kernel):
    a, b = torch.randn(N), torch.randn(N)
    torch.testing.assert_close(kernel(a, b), a + b)


def _deep(base: Path, total: int) -> Path:
    """A path under ``base`` about ``total`` bytes long, of 200-byte names (each one allowed)."""
    path = base
    while len(os.fsencode(str(path))) + 201 <= total:
        path = path / ("p" * 200)
    return path


@pytest.fixture
def compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    return tilelang.compile(_vadd(), out_idx=-1, target="c", execution_backend="cython")


def test_a_cache_directory_near_path_max_caches_in_memory(tmp_path, monkeypatch):
    root = _deep(tmp_path, 4040)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(_vadd(), out_idx=-1, target="c", execution_backend="cython")
    _works(kernel)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert any("bytes long: the files of entries under it would pass the system's limit" in m for m in messages)
    assert not list(tmp_path.iterdir())  # nothing made on the way


@pytest.mark.parametrize("home", ["", "relative/home"])
def test_an_empty_or_relative_home_is_not_the_cache_s_home(monkeypatch, tmp_path, home):
    pwd = pytest.importorskip("pwd")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TILELANG_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", home)
    path = default_cache_dir()
    assert path.is_absolute() and path == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "tilelang"
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_cache_dir() == tmp_path / "h" / ".cache" / "tilelang"


def test_a_relative_cache_dir_stays_where_it_was_first_used_and_a_blank_one_is_unset(monkeypatch, tmp_path):
    """A relative TILELANG_CACHE_DIR followed every os.chdir of the process (one cache per folder
    it visited, and `cache info` printed the relative path), and a process it started resolved it
    from its own directory; a blank one made a folder named ' '."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    monkeypatch.setenv("TILELANG_CACHE_DIR", "relcache")
    assert default_cache_dir() == tmp_path / "a" / "relcache"
    assert os.environ["TILELANG_CACHE_DIR"] == str(tmp_path / "a" / "relcache")  # what children inherit
    monkeypatch.chdir(tmp_path / "b")
    assert default_cache_dir() == tmp_path / "a" / "relcache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "abs"))
    assert default_cache_dir() == tmp_path / "abs"
    monkeypatch.setenv("HOME", "")  # '~' is the home the default path uses, not '/'
    monkeypatch.setenv("TILELANG_CACHE_DIR", "~/x")
    pwd = pytest.importorskip("pwd")
    assert default_cache_dir() == Path(pwd.getpwuid(os.getuid()).pw_dir) / "x"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for blank in (" ", "\t "):
        monkeypatch.setenv("TILELANG_CACHE_DIR", blank)
        assert default_cache_dir() == tmp_path / "xdg" / "tilelang"


def test_an_export_name_too_long_is_refused_before_writing(compiled, tmp_path):
    target = tmp_path / ("e" * 300)
    with pytest.raises(OSError, match=r"cannot export kernel 'vadd' to .*: the name 'eeee.*\.\.\.' is 300 bytes long, "
                                      r"and this file system allows \d+; choose a shorter name") as info:
        compiled.export(target)
    assert info.value.errno == errno.ENAMETOOLONG
    assert not list(tmp_path.iterdir())


def test_an_export_path_too_deep_leaves_no_folders(compiled, tmp_path):
    target = _deep(tmp_path / "d", 4200) / "exp"
    with pytest.raises(OSError, match=r"cannot export kernel 'vadd' to .*: the path is \d+ bytes long") as info:
        compiled.export(target)
    assert info.value.errno == errno.ENAMETOOLONG
    assert not list(tmp_path.iterdir())


@contextlib.contextmanager
def _file_size_limit(nbytes: int):
    """Writes past ``nbytes`` fail with EFBIG ("File too large"; Python ignores SIGXFSZ)."""
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_an_export_that_runs_out_of_room_names_the_export_and_leaves_nothing(compiled, tmp_path):
    target = tmp_path / "new" / "folders" / "exp"
    with _file_size_limit(2048), pytest.raises(OSError) as info:
        compiled.export(target)
    assert info.value.errno == errno.EFBIG
    assert str(info.value) == (f"[Errno {errno.EFBIG}] cannot export kernel 'vadd' to {target}: File too large; nothing "
                               f"was left there")
    assert not list(tmp_path.iterdir())  # the folders made on the way went too
    compiled.export(target)  # with room again
    _works(tilelang.load(target))


def test_an_overwrite_that_runs_out_of_room_keeps_the_previous_export(compiled, tmp_path):
    target = tmp_path / "exp"
    compiled.export(target)
    before = sorted(p.name for p in target.rglob("*"))
    with _file_size_limit(2048), pytest.raises(OSError, match=r"File too large; the previous export there is unchanged"):
        compiled.export(target, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    assert sorted(p.name for p in target.rglob("*")) == before
    _works(tilelang.load(target))
