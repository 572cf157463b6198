"""Cache hooks: export_library + JSON plan on save, tvm_ffi.load_module on load (fresh process)."""

from __future__ import annotations

import json
import os

import pytest
import torch
from _tvmffi_helpers import build

from tilelang_core import schema
from tilelang_core.artifact import BuildOptions, KernelArtifact
from tilelang_core.errors import ArtifactError
from tilelang_backend_tvmffi import plugin
from tilelang_backend_tvmffi.runtime import LIBRARY_FILE, PLAN_FILE


def _save(kernel, directory):
    directory.mkdir()
    plugin.tilelang_backend_save(kernel=kernel, directory=directory)
    (directory / "artifact.json").write_text(kernel.artifact.to_json())
    (directory / "options.json").write_text(schema.to_json(kernel._state.options))
    return directory


def test_save_writes_library_and_json_plan(tmp_path):
    k = build("scale_add", out_idx=[2])
    d = _save(k, tmp_path / "k")
    assert sorted(os.listdir(d)) == sorted([LIBRARY_FILE, PLAN_FILE, "artifact.json", "options.json"])
    plan = json.loads((d / PLAN_FILE).read_text())
    assert plan["entry"] == "scale_add" and plan["library"] == LIBRARY_FILE
    assert plan["target_kind"] == "llvm" and plan["out_idx"] == [2] and plan["alignment"] == 64


def test_loaded_kernel_can_be_saved_again(tmp_path):
    k = build("pad1", out_idx=[1])
    d1 = _save(k, tmp_path / "one")
    art = KernelArtifact.from_json((d1 / "artifact.json").read_text())
    loaded = plugin.tilelang_backend_load(artifact=art, directory=d1, options=BuildOptions(out_idx=[1]))
    d2 = tmp_path / "two"
    d2.mkdir()
    plugin.tilelang_backend_save(kernel=loaded, directory=d2)
    again = plugin.tilelang_backend_load(artifact=art, directory=d2, options=BuildOptions(out_idx=[1]))
    torch.testing.assert_close(again(torch.ones(2)), torch.tensor([0.0, 1, 1, 0]))


def test_missing_or_corrupt_files_raise_artifact_error(tmp_path):
    k = build("pad1", out_idx=[1])
    opts = BuildOptions(out_idx=[1])
    d = _save(k, tmp_path / "k")
    art = k.artifact

    (d / LIBRARY_FILE).write_bytes(b"not a shared library")
    with pytest.raises(ArtifactError, match="cannot load"):
        plugin.tilelang_backend_load(artifact=art, directory=d, options=opts)
    (d / LIBRARY_FILE).unlink()
    with pytest.raises(ArtifactError, match="missing"):
        plugin.tilelang_backend_load(artifact=art, directory=d, options=opts)
    (d / PLAN_FILE).write_text("{not json")
    with pytest.raises(ArtifactError, match="cannot read"):
        plugin.tilelang_backend_load(artifact=art, directory=d, options=opts)
    (d / PLAN_FILE).unlink()
    with pytest.raises(ArtifactError, match="missing"):
        plugin.tilelang_backend_load(artifact=art, directory=d, options=opts)


def test_plan_for_another_kernel_is_refused(tmp_path):
    d = _save(build("pad1", out_idx=[1]), tmp_path / "k")
    other = build("scale_add").artifact
    with pytest.raises(ArtifactError, match="is for kernel 'pad1', not 'scale_add'"):
        plugin.tilelang_backend_load(artifact=other, directory=d, options=BuildOptions())


def test_library_of_another_kernel_or_an_edited_plan_is_refused(tmp_path):
    """The library carries the identity of the artifact and plan it was saved with."""
    k = build("pad1", out_idx=[1])
    d = _save(k, tmp_path / "k")
    other = _save(build("scale_add", out_idx=[2]), tmp_path / "other")
    opts = BuildOptions(out_idx=[1])
    original = (d / LIBRARY_FILE).read_bytes()
    # replace files (new inodes) rather than rewrite them: a library once loaded must never change in place
    (d / LIBRARY_FILE).unlink()
    (d / LIBRARY_FILE).write_bytes((other / LIBRARY_FILE).read_bytes())
    with pytest.raises(ArtifactError, match=r"kernel.so was built for another kernel .*not for kernel 'pad1'"):
        plugin.tilelang_backend_load(artifact=k.artifact, directory=d, options=opts)
    (d / LIBRARY_FILE).unlink()
    (d / LIBRARY_FILE).write_bytes(original)
    plan = json.loads((d / PLAN_FILE).read_text())
    for key, value in (("alignment", 0), ("library", "../other/kernel.so"), ("target_kind", "c")):
        edited = {**plan, key: value}
        (d / PLAN_FILE).write_text(json.dumps(edited))
        with pytest.raises(ArtifactError):
            plugin.tilelang_backend_load(artifact=k.artifact, directory=d, options=opts)
    (d / PLAN_FILE).write_text(json.dumps(plan))
    loaded = plugin.tilelang_backend_load(artifact=k.artifact, directory=d, options=opts)
    torch.testing.assert_close(loaded(torch.ones(2)), torch.tensor([0.0, 1, 1, 0]))


def test_reloading_a_directory_saved_again_runs_the_new_kernel(tmp_path):
    """dlopen hands back a library already loaded under the same path; a load must not."""
    import shutil

    k = build("pad1", out_idx=[1])
    d = _save(k, tmp_path / "k")
    art = k.artifact
    opts = BuildOptions(out_idx=[1])
    torch.testing.assert_close(plugin.tilelang_backend_load(artifact=art, directory=d, options=opts)(torch.ones(2)),
                               torch.tensor([0.0, 1, 1, 0]))
    shutil.rmtree(d)
    k2 = build("scale_add", out_idx=[2])
    d = _save(k2, tmp_path / "k")  # same path, another kernel
    loaded = plugin.tilelang_backend_load(artifact=k2.artifact, directory=d, options=BuildOptions(out_idx=[2]))
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    torch.testing.assert_close(loaded(x, y, 2.0), x + 2 * y)
