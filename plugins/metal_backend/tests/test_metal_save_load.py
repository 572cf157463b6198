"""Save and load: Metal source + launch plan JSON, loadable without TVM, checked against the artifact;
the kernel cache marks the entries as compiled again at load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.artifact import BuildOptions
from tilelang_core.errors import ArtifactError

import metal_kernels as MK
from mps_standin import StandinRuntime
from tilelang_backend_metal import kernel as K

ON_MAC_WITH_MPS = sys.platform == "darwin" and torch.backends.mps.is_available()


@pytest.fixture
def exported(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(MK.scaled("float16"), out_idx=[1], execution_backend="metal", target="metal")
    path = kernel.export(tmp_path / "scaled")
    return kernel, path


def test_export_holds_the_source_and_the_launch_plan(exported):
    kernel, path = exported
    backend = path / "backend"
    assert sorted(p.name for p in backend.iterdir()) == [K.SOURCE_FILE, K.PLAN_FILE]
    assert (backend / K.SOURCE_FILE).read_text() == kernel.get_kernel_source()
    plan = json.loads((backend / K.PLAN_FILE).read_text())
    assert plan == kernel.runner.plan and plan["outputs"] == [1]
    meta = json.loads((path / "tilelang-kernel.json").read_text())
    assert meta["compiled_at_load"] is True and meta["backend"]["name"] == "metal"


@pytest.mark.skipif(ON_MAC_WITH_MPS, reason="checks a load that compiles nothing, on a machine without MPS")
def test_load_in_a_fresh_process_imports_no_tvm_and_compiles_nothing_here(exported):
    _, path = exported
    code = (
        "import sys, tilelang, torch\n"
        f"k = tilelang.load({str(path)!r})\n"
        "assert k.backend.name == 'metal' and k.runner.plan['kernels'][0]['name'] == 'scaled_kernel_kernel'\n"
        "try:\n    k(torch.zeros(4), 1.0)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
        "print('tvm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    error, tvm_imported = out.stdout.strip().splitlines()
    assert error.startswith("BackendUnavailableError") and "need macOS with torch's MPS device" in error
    assert tvm_imported == "False"


def test_load_compiles_the_source_where_it_can_run_with_standin_shader_library(exported):
    kernel, path = exported
    runtime = StandinRuntime()
    loaded = K.load(kernel.artifact, path / "backend", kernel.options, runtime=runtime)
    assert runtime.sources == [kernel.get_kernel_source()]  # compiled at load: compiles_at_load
    loaded(torch.zeros(5), 1.0)
    assert len(runtime.sources) == 1 and [c.threads for c in runtime.calls] == [[64, 1, 1]]
    nowhere = StandinRuntime(unavailable="macOS only: test")
    K.load(kernel.artifact, path / "backend", kernel.options, runtime=nowhere)
    assert nowhere.sources == []


def test_a_source_that_does_not_compile_at_load_is_an_artifact_error_with_standin_shader_library(exported):
    kernel, path = exported

    class Failing(StandinRuntime):
        def compile_shader(self, source):
            raise RuntimeError("Metal: error: this macOS cannot compile it")

    with pytest.raises(ArtifactError, match="Metal could not compile kernel 'scaled_kernel'.*recompile"):
        K.load(kernel.artifact, path / "backend", kernel.options, runtime=Failing())


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda d: (d / K.SOURCE_FILE).write_text((d / K.SOURCE_FILE).read_text() + "\n// edited\n"),
         "does not match its recorded SHA-256"),
        (lambda d: (d / K.PLAN_FILE).unlink(), "incomplete or corrupt"),
        (lambda d: (d / K.PLAN_FILE).write_text("{not json"), "incomplete or corrupt"),
        (lambda d: _edit_plan(d, lambda p: p.update(format=99)), "launch plan format 99"),
        (lambda d: _edit_plan(d, lambda p: p["kernels"][0].update(group_size=[1024, 1, 1])),
         "does not match the kernel's artifact"),
        (lambda d: _edit_plan(d, lambda p: p["kernels"][0]["scalars"]["slots"][0].update(offset=4)),
         "does not match the kernel's artifact"),
    ],
)
def test_load_refuses_files_that_do_not_fit_the_artifact(exported, tamper, message):
    kernel, path = exported
    tamper(path / "backend")
    with pytest.raises(ArtifactError, match=message):
        K.load(kernel.artifact, path / "backend", kernel.options)


def _edit_plan(directory, change):
    plan = json.loads((directory / K.PLAN_FILE).read_text())
    change(plan)
    (directory / K.PLAN_FILE).write_text(json.dumps(plan))


def test_load_refuses_other_output_indices(exported):
    kernel, path = exported
    with pytest.raises(ArtifactError, match="out_idx"):
        K.load(kernel.artifact, path / "backend", BuildOptions(out_idx=[0]))


def test_the_cache_keeps_metal_kernels_as_source_compiled_again_when_loaded(tmp_path, monkeypatch):
    from tilelang_core.cache.cli import _cmd_info

    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    tilelang.compile(MK.scaled("int32"), out_idx=[1], execution_backend="metal", target="metal")
    info = tilelang.cache.info()
    (row,) = [r for name, r in info["backends"].items() if name.startswith("metal ")]
    assert row == {"entries": 1, "bytes": row["bytes"], "compiled_at_load": 1, "installed": "0.1.0"}
    import argparse
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _cmd_info(argparse.Namespace(json=False))
    assert "(1 saved as source: compiled again when loaded)" in out.getvalue()
    # a second process gets a disk hit: no lowering, the source and plan come from the entry
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import tilelang, metal_kernels as MK\n"
        "k = tilelang.compile(MK.scaled('int32'), out_idx=[1], execution_backend='metal', target='metal')\n"
        "print(k.cache_key is not None, type(k.runner).__name__)\n"
    ) % str(Path(__file__).parent)
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "MetalKernel"]


def test_save_refuses_what_it_did_not_build(tmp_path):
    with pytest.raises(TypeError, match="cannot save"):
        K.save(object(), tmp_path)


def test_dynamic_rows_kernel_round_trips_through_export(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    func = MK.tileops_module().copy_dynamic(16, 16, "gpu")
    kernel = tilelang.compile(func, execution_backend="metal", target="metal")
    loaded = tilelang.load(kernel.export(tmp_path / "k"))
    assert loaded.artifact == kernel.artifact and loaded.runner.plan == kernel.runner.plan
    runtime = StandinRuntime()
    a, b = torch.zeros(40, 48), torch.zeros(40, 48, dtype=torch.float16)
    loaded.runner.with_runtime(runtime)(a, b)
    assert runtime.calls[0].threads == [384, 3, 1] and runtime.calls[0].group_size == [128, 1, 1]
