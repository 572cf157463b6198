"""The retired ctypes backend's load hook (the smallest reference backend, and the scaffold's
template) reports a damaged saved kernel as an ``ArtifactError`` and leaves no private folder
behind; before, a library that failed to load leaked its copy in the temp directory. (The
plugin's own tests stay the conformance suite plus one short test, test_ctypes_retirement.py.)"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

import tilelang
from tilelang_core.conformance import kernels
from tilelang_core.errors import ArtifactError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import installed  # noqa: E402

pytestmark = pytest.mark.skipif(not installed("ctypes"), reason="the retired ctypes backend is not installed")


def test_a_damaged_saved_kernel_is_an_artifact_error_and_leaves_no_folder(tmp_path, monkeypatch):
    from tilelang_backend_ctypes import plugin

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        built = tilelang.compile(kernels.vadd(), target="c", execution_backend="ctypes")
    saved = tmp_path / "saved"
    saved.mkdir()
    plugin.tilelang_backend_save(built.runner, saved)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "private"))
    os.mkdir(tempfile.tempdir)
    (saved / plugin.LIBRARY).write_bytes(b"not a shared library")
    for match in ("cannot load the ctypes kernel in .*recompile the kernel", f"{plugin.LIBRARY} missing"):
        with pytest.raises(ArtifactError, match=match):
            plugin.tilelang_backend_load(built.artifact, saved, built.options)
        (saved / plugin.LIBRARY).unlink(missing_ok=True)
    assert os.listdir(tempfile.tempdir) == []
