"""No temporary files: building, calling (through the recording stand-in for
``torch.mps.compile_shader``), exporting, loading in this and in a fresh process and the disk cache
write nothing into the temporary directory; a source the build refuses is the one file kept, at the
path the error names, for the user to read (conftest.py gives every test of this folder a private,
empty temporary directory and fails a test that leaves anything in it; this test looks itself).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.errors import BuildError

import metal_kernels as MK
from mps_standin import StandinRuntime


def temp_files() -> list[str]:
    return sorted(p.name for p in Path(tempfile.gettempdir()).iterdir())


def test_build_call_export_load_and_cache_leave_no_temp_files_with_standin_shader_library(tmp_path, monkeypatch):
    assert os.environ["TMPDIR"] == tempfile.gettempdir() and temp_files() == []  # conftest's private directory
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    kernel = tilelang.compile(MK.scaled("int32"), out_idx=[1], execution_backend="metal", target="metal")
    runner = kernel.runner.with_runtime(StandinRuntime())
    runner(torch.randn(10), 3)
    path = kernel.export(tmp_path / "exported")
    tilelang.load(path)
    code = f"import tilelang; tilelang.load({str(path)!r}); print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    tilelang.compile(MK.scaled("int32"), out_idx=[1], execution_backend="metal", target="metal")  # a cache hit
    assert temp_files() == []


def test_a_refused_source_is_the_only_file_kept_at_the_path_the_error_names():
    from tilelang_core.artifact import BuildOptions
    from tilelang_core.lowering import lower

    from tilelang_backend_metal import plugin

    artifact = lower(MK.scaled("float32"), target="metal")
    broken = artifact.device_source.replace("[[ buffer(1) ]]", "[[ buffer(7) ]]", 1)
    with pytest.raises(BuildError) as info:
        plugin.tilelang_backend_build(artifact=artifact.replace(device_source=broken), options=BuildOptions())
    kept = Path(info.value.source)
    assert temp_files() == [kept.name] and kept.parent == Path(tempfile.gettempdir())
    assert kept.name.startswith("tilelang-metal-scaled_kernel-") and kept.read_text() == broken
    assert str(info.value).endswith(f"\nsource kept at: {kept}")
    kept.unlink()
