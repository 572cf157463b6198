"""Build directories in the temp dir: a ``c`` kernel's library is built in a private directory that
is removed as soon as the library is loaded, so that a process killed later (``kill -9``, the OOM
killer, ``os._exit``) leaves nothing behind; the kernel keeps running and can still be saved and
loaded. ``verbose=True`` keeps the directory and says where."""

from __future__ import annotations

import tempfile

import pytest
import torch
from _tvmffi_helpers import artifact, run_python

from tilelang_core.artifact import BuildOptions
from tilelang_backend_tvmffi import plugin
from tilelang_backend_tvmffi.runtime import LIBRARY_FILE


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch):
    """tempfile's directory for this test: an empty folder whose leftovers the test can list."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith("tilelang_tvmffi"))


def test_a_built_c_kernel_leaves_no_directory_and_still_runs_saves_and_loads(tmpdir_root, tmp_path):
    art = artifact("scale_add", "c")
    k = plugin.tilelang_backend_build(artifact=art, options=BuildOptions(out_idx=[2]))
    assert _leftovers(tmpdir_root) == []  # while the kernel is alive
    a, b = torch.randn(16, 4), torch.randn(16, 4)
    torch.testing.assert_close(k(a, b, 2.0), a + 2.0 * b)
    saved = tmp_path / "saved"
    saved.mkdir()
    plugin.tilelang_backend_save(kernel=k, directory=saved)
    assert (saved / LIBRARY_FILE).stat().st_size > 0
    loaded = plugin.tilelang_backend_load(artifact=art, directory=saved, options=BuildOptions(out_idx=[2]))
    torch.testing.assert_close(loaded(a, b, 2.0), a + 2.0 * b)
    assert _leftovers(tmpdir_root) == []


def test_a_process_that_dies_without_cleaning_up_leaves_no_directory(tmp_path):
    root = tmp_path / "tmp"
    root.mkdir()
    proc = run_python(
        """
        import os, sys, torch
        sys.path.insert(0, %r)
        from _tvmffi_helpers import build
        k = build("scale_add", out_idx=[2], target="c")
        a = torch.ones(16, 4)
        assert torch.equal(k(a, a, 1.0), a * 2)
        print("ran", flush=True)
        os._exit(0)  # as a killed process: no atexit handler, no finalizer runs
        """ % str(__import__("pathlib").Path(__file__).parent),
        env={"TMPDIR": str(root)},
    )
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr
    assert _leftovers(root) == []


def test_verbose_builds_keep_their_directory(tmpdir_root, capsys):
    art = artifact("scale_add", "c")
    k = plugin.tilelang_backend_build(artifact=art, options=BuildOptions(out_idx=[2], verbose=True))
    (kept,) = _leftovers(tmpdir_root)
    assert (tmpdir_root / kept / LIBRARY_FILE).is_file()
    assert str(tmpdir_root / kept / LIBRARY_FILE) in capsys.readouterr().out
    a = torch.randn(8, 4)
    torch.testing.assert_close(k(a, a, 1.0), 2 * a)
