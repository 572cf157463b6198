"""Saving an ``llvm`` kernel where its object file cannot be written: LLVM's object writer ends the
process on a failed write (``LLVM ERROR: IO failure on output stream``), so the save is refused
first with a ``BuildError`` (the cache then keeps the kernel in memory only) and the process lives."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest
import torch
from _tvmffi_helpers import build, run_python

from tilelang_core.errors import BuildError
from tilelang_backend_tvmffi import plugin, runtime

HERE = str(Path(__file__).parent)


def test_a_save_under_a_file_size_limit_is_refused_and_the_process_lives(tmp_path):
    proc = run_python(
        """
        import resource, sys, torch
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        sys.path.insert(0, %r)
        from _tvmffi_helpers import build
        from tilelang_backend_tvmffi import plugin
        from tilelang_core.errors import BuildError
        k = build("scale_add", out_idx=[2], target="llvm")
        a = torch.ones(16, 4)
        assert torch.equal(k(a, a, 1.0), a * 2)
        try:
            plugin.tilelang_backend_save(kernel=k, directory=%r)
        except BuildError as exc:
            print("refused:", exc)
        assert torch.equal(k(a, a, 2.0), a * 3)
        print("alive")
        """ % (HERE, str(tmp_path)),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused: tvm_ffi: not enough room to write the kernel's object code" in proc.stdout
    assert "`ulimit -f`" in proc.stdout and "alive" in proc.stdout


def test_a_save_with_a_nearly_full_temporary_folder_is_refused(tmp_path, monkeypatch):
    k = build("scale_add", out_idx=[2], target="llvm")
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 << 20, (10 << 20) - 1000, 1000))
    with pytest.raises(BuildError, match=r"has 1000 bytes free; free some space, set TMPDIR"):
        plugin.tilelang_backend_save(kernel=k, directory=tmp_path)
    assert not (tmp_path / runtime.LIBRARY_FILE).exists()


def test_a_save_with_room_below_the_unmeasured_size_measures_and_writes(tmp_path, monkeypatch):
    k = build("scale_add", out_idx=[2], target="llvm")
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1 << 30, 1 << 29, runtime.ROOM_UNMEASURED - 1))
    plugin.tilelang_backend_save(kernel=k, directory=tmp_path)
    assert (tmp_path / runtime.LIBRARY_FILE).stat().st_size > 0
    a = torch.randn(16, 4)
    torch.testing.assert_close(k(a, a, 1.0), a * 2)
