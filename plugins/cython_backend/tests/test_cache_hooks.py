"""Save/load hooks: the library and a JSON call plan; loading needs neither TVM nor a compiler."""

from __future__ import annotations

import json
import os

import pytest
import torch
from tilelang_core.artifact import BuildOptions
from tilelang_core.errors import ArtifactError

import kernels as K
from tilelang_backend_cython import plugin


def _save(art, tmp_path, **options):
    k = K.build(art, **options)
    d = tmp_path / "entry"
    d.mkdir()
    plugin.tilelang_backend_save(kernel=k, directory=d)
    (d / "artifact.json").write_text(art.to_json())
    return k, d


def test_save_writes_library_plan_and_source_no_pickle(tmp_path):
    _, d = _save(K.vadd_dynamic(), tmp_path, out_idx=[2])
    names = sorted(p.name for p in d.iterdir())
    assert names == ["artifact.json", "cython_plan.json", "kernel.c", "kernel.so"]
    record = json.loads((d / "cython_plan.json").read_text())
    assert record["plan"]["outputs"] == [2] and record["library"] == "kernel.so"
    assert not any(p.suffix in (".pkl", ".pickle") for p in d.iterdir())


def test_loaded_kernel_can_be_saved_again(tmp_path):
    art = K.pad2()
    _, d = _save(art, tmp_path, out_idx=[1])
    k = plugin.tilelang_backend_load(artifact=art, directory=d, options=BuildOptions(out_idx=[1]))
    d2 = tmp_path / "again"
    d2.mkdir()
    plugin.tilelang_backend_save(kernel=k, directory=d2)
    k2 = plugin.tilelang_backend_load(artifact=art, directory=d2, options=BuildOptions(out_idx=[1]))
    a = torch.randn(4)
    torch.testing.assert_close(k2(a), torch.nn.functional.pad(a, (1, 1)))


@pytest.mark.parametrize("damage", ["no_plan", "bad_json", "no_library", "wrong_format", "wrong_name", "wrong_out_idx",
                                    "garbage_library", "other_cpu",
                                    "bad_symbol_slot", "bad_bytecode"])
def test_corrupt_entry_raises_artifact_error(tmp_path, damage):
    art = K.pad2() if damage in ("bad_symbol_slot", "bad_bytecode") else K.vadd_static()
    _, d = _save(art, tmp_path)
    options = BuildOptions()
    plan_file = d / "cython_plan.json"
    if damage == "no_plan":
        plan_file.unlink()
    elif damage == "bad_json":
        plan_file.write_text("{not json")
    elif damage == "no_library":
        (d / "kernel.so").unlink()
    elif damage == "garbage_library":
        (d / "kernel.so").write_bytes(b"\x7fELF garbage")
    else:
        record = json.loads(plan_file.read_text())
        if damage == "wrong_format":
            record["plan"]["format"] = 99
        elif damage == "wrong_name":
            record["plan"]["name"] = "other"
        elif damage == "wrong_out_idx":
            options = BuildOptions(out_idx=[2])
        elif damage == "other_cpu":
            record["cpu"] = "0" * 16
        elif damage == "bad_symbol_slot":
            record["plan"]["params"][0]["dims"][0] = ["sym", 5]
        elif damage == "bad_bytecode":
            record["plan"]["exprs"][0]["code"] = [3, 0]  # ADD on an empty stack
        plan_file.write_text(json.dumps(record))
    with pytest.raises(ArtifactError):
        plugin.tilelang_backend_load(artifact=art, directory=d, options=options)


def test_save_rejects_foreign_objects(tmp_path):
    with pytest.raises(TypeError, match="cannot save"):
        plugin.tilelang_backend_save(kernel=lambda: None, directory=tmp_path)
