"""Build directories in the temp dir (issue 11 §5): a successful build leaves nothing behind, the
kernel keeps working and can still be saved and loaded; a failed build, ``verbose=True`` or
``TILELANG_CYTHON_KEEP_BUILD=1`` keep the directory with the source."""

from __future__ import annotations

import tempfile

import pytest
import torch
from tilelang_core.artifact import BuildOptions
from tilelang_core.errors import BuildError

import kernels as K


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch):
    """tempfile's directory for this test: an empty folder whose leftovers the test can list."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.delenv("TILELANG_CYTHON_KEEP_BUILD", raising=False)
    return root


def _leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith("tilelang-cython-"))


def _unique_vadd(tag: str):
    art = K.vadd_static()
    art.device_source += f"\n/* {tag} */\n"  # a source no other test compiled in this process
    return art


def test_successful_builds_leave_no_directory_and_still_save_and_load(tmpdir_root, tmp_path):
    from tilelang_backend_cython import plugin

    art = _unique_vadd("build-dirs: fresh")
    k = K.build(art, out_idx=[2])
    again = K.build(art, out_idx=[2])  # the same source again: compiled once, loaded from memory
    assert _leftovers(tmpdir_root) == []
    a, b = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(k(a, b), a + b)
    torch.testing.assert_close(again(a, b), a + b)
    saved = tmp_path / "saved"
    saved.mkdir()
    plugin.tilelang_backend_save(kernel=k, directory=saved)
    assert sorted(p.name for p in saved.iterdir()) == ["cython_plan.json", "kernel.c", "kernel.so"]
    assert "__tl_cy_call" in (saved / "kernel.c").read_text()
    loaded = plugin.tilelang_backend_load(artifact=art, directory=saved, options=BuildOptions(out_idx=[2]))
    torch.testing.assert_close(loaded(a, b), a + b)
    assert _leftovers(tmpdir_root) == []


def test_failed_build_keeps_its_source(tmpdir_root):
    art = K.artifact("broken_dirs", [K.tensor("A", [4])], [K.ptr("A", 0)],
                     "#include <stdint.h>\nint32_t broken_dirs(float *A) { return not C at all; }\n")
    with pytest.raises(BuildError) as info:
        K.build(art)
    (kept,) = _leftovers(tmpdir_root)
    source = tmpdir_root / kept / "broken_dirs.c"
    assert source.exists() and f"source kept at: {source}" in str(info.value)


@pytest.mark.parametrize("how", ["env", "verbose"])
def test_asked_for_builds_are_kept(tmpdir_root, monkeypatch, capsys, how):
    if how == "env":
        monkeypatch.setenv("TILELANG_CYTHON_KEEP_BUILD", "1")
        k = K.build(_unique_vadd("build-dirs: keep env"), out_idx=[2])
    else:
        k = K.build(_unique_vadd("build-dirs: keep verbose"), out_idx=[2], verbose=True)
        assert "build kept in" in capsys.readouterr().out
    (kept,) = _leftovers(tmpdir_root)
    names = sorted(p.name for p in (tmpdir_root / kept).iterdir())
    assert names == ["vadd.c", "vadd.so"]
    assert k.meta["source"] == str(tmpdir_root / kept / "vadd.c")
    a = torch.randn(16)
    torch.testing.assert_close(k(a, a), 2 * a)


def test_an_interrupted_build_leaves_no_directory(tmpdir_root, monkeypatch):
    """Before, Ctrl-C while the C compiler ran left the build folder (source, library, compiler
    output) in the temp dir (4 of 20 interrupts)."""
    from tilelang_backend_cython import compiler

    def interrupted(cmd, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(compiler, "run_compiler", interrupted)
    with pytest.raises(KeyboardInterrupt):
        K.build(_unique_vadd("build-dirs: interrupted"), out_idx=[2])
    assert _leftovers(tmpdir_root) == []


def test_the_folders_of_killed_builds_are_removed_by_the_next_build(tmpdir_root):
    """Before: a process killed while it compiled (SIGKILL, or SIGTERM: no cleanup either) left its
    build folder in the temp dir for good (2 of 6 kills). Folders of processes that still run, kept
    ones (no marker) and ones written in the last minutes stay."""
    import os
    import subprocess
    import sys
    import time

    from tilelang_backend_cython import build_dirs

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = int(gone.stdout)

    def folder(pid, tag, marked=True, age=3600):
        d = tmpdir_root / f"tilelang-cython-{pid}-{tag}-abcd1234"
        d.mkdir()
        (d / f"{tag}.c").write_text("int x;")
        if marked:
            (d / build_dirs.BUILDING).touch()
            old = time.time() - age
            os.utime(d / build_dirs.BUILDING, (old, old))
        return d

    killed = folder(dead, "killed")
    running = folder(os.getpid(), "running")
    kept = folder(dead, "kept", marked=False)
    recent = folder(dead, "recent", age=10)
    other = tmpdir_root / "tilelang-cython-k-abcd1234"  # an older build's name, without a pid: never touched
    other.mkdir()
    assert build_dirs.reap_leftovers(force=True) == [killed]
    assert not killed.exists() and running.exists() and kept.exists() and recent.exists() and other.exists()
    k = K.build(_unique_vadd("build-dirs: after a killed build"), out_idx=[2])
    a, b = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(k(a, b), a + b)


def test_a_failed_build_is_kept_without_the_building_marker(tmpdir_root):
    from tilelang_backend_cython import build_dirs

    art = K.artifact("broken_marker", [K.tensor("A", [4])], [K.ptr("A", 0)],
                     "#include <stdint.h>\nint32_t broken_marker(float *A) { return not C at all; }\n")
    with pytest.raises(BuildError):
        K.build(art)
    (kept,) = [p for p in tmpdir_root.iterdir() if p.name.startswith("tilelang-cython-")]
    assert not (kept / build_dirs.BUILDING).exists()
    assert build_dirs.reap_leftovers(force=True) == [] and kept.exists()
