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


def test_an_interrupted_build_leaves_no_folder(tmp_path, monkeypatch):
    """Before, Ctrl-C while the C compiler ran left the build folder in the temp dir (6 of 20 interrupts)."""
    import tempfile

    import pytest
    from tilelang_core import compiler_process

    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")

    def interrupted(cmd, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(compiler_process, "run_compiler", interrupted)  # the plugin imports it when it builds
    with warnings.catch_warnings(), pytest.raises(KeyboardInterrupt):
        warnings.simplefilter("ignore", DeprecationWarning)
        tilelang.compile(kernels.vadd(), target="c", execution_backend="ctypes")
    assert [p.name for p in root.iterdir() if p.name.startswith("tilelang-ctypes-")] == []
