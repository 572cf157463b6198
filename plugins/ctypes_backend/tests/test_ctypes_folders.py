"""What the conformance suite cannot see: the ctypes backend leaves no folders behind."""

import gc
import warnings

import torch

import tilelang
from tilelang_core.conformance import kernels


def test_a_kernel_s_folder_goes_with_it_built_or_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ctypes is retired: it warns once
        built = tilelang.compile(kernels.vadd(), target="c", execution_backend="ctypes")
    built.export(tmp_path / "vadd")
    loaded = tilelang.load(tmp_path / "vadd")
    a = torch.arange(16, dtype=torch.float32)
    for kernel in (built, loaded):
        c = torch.empty(16)
        kernel(a, a, c)
        assert torch.equal(c, a + a)
    folders = [k.runner.directory for k in (built, loaded)]
    assert all(f.is_dir() for f in folders) and folders[0] != folders[1]
    del built, loaded, kernel
    gc.collect()
    assert [f for f in folders if f.exists()] == []


def test_a_damaged_saved_kernel_is_an_artifact_error_and_leaves_no_folder(tmp_path, monkeypatch):
    import tempfile
    from pathlib import Path

    import pytest

    from tilelang_backend_ctypes import plugin
    from tilelang_core.errors import ArtifactError

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        built = tilelang.compile(kernels.vadd(), target="c", execution_backend="ctypes")
    saved = tmp_path / "saved"
    saved.mkdir()
    plugin.tilelang_backend_save(built.runner, saved)
    artifact, options = built.artifact, built.options
    (saved / plugin.LIBRARY).write_bytes(b"not a shared library")
    with pytest.raises(ArtifactError, match="cannot load the ctypes kernel in .*recompile the kernel"):
        plugin.tilelang_backend_load(artifact, saved, options)
    (saved / plugin.LIBRARY).unlink()
    with pytest.raises(ArtifactError, match=f"{plugin.LIBRARY} missing"):
        plugin.tilelang_backend_load(artifact, saved, options)
    del built
    gc.collect()
    assert [p.name for p in Path(tempfile.gettempdir()).iterdir()] == []
