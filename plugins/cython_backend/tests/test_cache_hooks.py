"""Save/load hooks: the library and a JSON call plan; loading needs neither TVM nor a compiler."""

from __future__ import annotations

import json
import os
import shutil

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


def _vsub(n: int):
    """Same parameters and name as ``K.vadd_static(n)``, another body: C = A - B."""
    art = K.vadd_static(n)
    return art.replace(device_source=art.device_source.replace("A[i] + B[i]", "A[i] - B[i]"))


@pytest.mark.parametrize("damage", ["plan_dims_shrunk", "plan_dtype_changed", "artifact_and_plan_shrunk",
                                    "swapped_library", "library_outside", "source_outside"])
def test_plan_or_library_that_disagrees_with_the_artifact_is_refused(tmp_path, damage):
    """The core's digests would be re-computed by a tamperer; the backend's own checks must hold."""
    art = K.vadd_static(256)
    _, d = _save(art, tmp_path, out_idx=[2])
    plan_file = d / "cython_plan.json"
    record = json.loads(plan_file.read_text())
    options = BuildOptions(out_idx=[2])
    if damage == "plan_dims_shrunk":  # C allocated with 64 elements, the kernel writes 256
        record["plan"]["params"][2]["dims"] = [["static", 64]]
        match = r"saved call plan does not match the artifact \(first difference at plan.params\[2\].dims\[0\]\[1\]\)"
    elif damage == "plan_dtype_changed":
        record["plan"]["params"][0]["dl"] = [2, 16, 1]
        match = r"does not match the artifact \(first difference at plan.params\[0\].dl\[1\]\)"
    elif damage == "artifact_and_plan_shrunk":  # both agree with each other, not with the library
        record["plan"]["params"][2]["dims"] = [["static", 64]]
        params = [p if i != 2 else p.__class__(**{**p.__dict__, "shape": [64]}) for i, p in enumerate(art.params)]
        art = art.replace(params=params)
        match = "kernel.so was built for another kernel"
    elif damage == "swapped_library":
        other = tmp_path / "other"
        other.mkdir()
        plugin.tilelang_backend_save(kernel=K.build(_vsub(256), out_idx=[2]), directory=other)
        (d / "kernel.so").unlink()
        shutil.copy(other / "kernel.so", d / "kernel.so")
        match = "kernel.so was built for another kernel"
    elif damage == "library_outside":
        record["library"] = str(tmp_path / "elsewhere.so")
        match = "names files outside the kernel directory"
    else:
        record["source"] = "../../etc/passwd"
        match = "names files outside the kernel directory"
    plan_file.write_text(json.dumps(record))
    with pytest.raises(ArtifactError, match=match):
        plugin.tilelang_backend_load(artifact=art, directory=d, options=options)


def test_library_identifies_its_kernel(tmp_path):
    from tilelang_backend_cython import identity
    from tilelang_backend_cython.plan import make_plan

    art = K.vadd_static(256)
    _, d = _save(art, tmp_path, out_idx=[2])
    plan = make_plan(art, BuildOptions(out_idx=[2]))
    assert identity.library_id(d / "kernel.so") == identity.kernel_id(art, plan)
    assert identity.kernel_id(_vsub(256), plan) != identity.kernel_id(art, plan)
    k = plugin.tilelang_backend_load(artifact=art, directory=d, options=BuildOptions(out_idx=[2]))
    a = torch.arange(256, dtype=torch.float32)
    torch.testing.assert_close(k(a, a), a + a)
