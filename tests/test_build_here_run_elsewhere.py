"""Build here, run elsewhere: probes that can build but not run, library toolchains in the cache
key, and the CUDA architecture as data (no silent sm_50)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.backends import explain_selection, get_registry, select_backend
from tilelang_core.errors import BackendUnavailableError, NoBackendForTargetError, TargetError
from tilelang_core.testkit import plugin_source, spec_dict, write_distribution

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_backends import add_one, site, stub_hooks  # noqa: E402,F401  (site: a fixture)

BUILD_ONLY = {"available": False, "can_build": True, "reason": "no CUDA driver on this machine"}

HOOKS = stub_hooks('raise AssertionError("a kernel that cannot run here was called")', 'built.txt', 'built elsewhere')


def install(site, name, targets, *, probe=None, body=""):
    write_distribution(site, name, plugin_source(spec_dict(name, targets), probe=probe, body=body))
    get_registry().refresh()


def c_target(priority=5, **kw):
    return {"c": {"priority": priority, "consumes": ["device_source"], "device_language": "c", **kw}}


def test_auto_never_picks_a_build_only_backend(site):
    install(site, "builder", c_target(100), probe=BUILD_ONLY, body=HOOKS)
    verdicts = {c.name: c for c in explain_selection("c")}
    assert verdicts["builder"].verdict == "build_only" and "no CUDA driver" in verdicts["builder"].reason
    with pytest.raises(NoBackendForTargetError, match="builder: build_only") as info:
        select_backend("auto", "c")
    # the way to build anyway: name the backend
    assert "To build it here without running it" in str(info.value)
    assert "execution_backend='builder'" in str(info.value)
    install(site, "runner", c_target(1), body=HOOKS)
    assert select_backend("auto", "c").name == "runner"  # lower priority, but it can run


def test_named_build_only_backend_builds_exports_and_refuses_calls(site, tmp_path):
    install(site, "builder", c_target(), probe=BUILD_ONLY, body=HOOKS)
    kernel = tilelang.compile(add_one(8), out_idx=-1, execution_backend="builder", target="c")
    assert kernel.cannot_run == "no CUDA driver on this machine"
    with pytest.raises(BackendUnavailableError) as info:
        kernel(None)
    message = str(info.value)
    assert message.startswith("main() cannot run on this machine: no CUDA driver on this machine;")
    assert "export the kernel (kernel.export(path)) and load it (tilelang.load(path))" in message
    out = kernel.export(tmp_path / "exported")
    assert (out / "backend" / "built.txt").read_text() == "built elsewhere"


def test_a_backend_that_can_neither_build_nor_run_is_refused(site):
    install(site, "nothing", c_target(), probe={"available": False, "reason": "no compiler"}, body=HOOKS)
    with pytest.raises(BackendUnavailableError, match="cannot run target 'c' on this machine: no compiler"):
        select_backend("nothing", "c")


def test_library_toolchain_identity_follows_versions_env_and_files(tmp_path, monkeypatch):
    from importlib.metadata import version

    from tilelang_core import schema
    from tilelang_core.cache.key import native_compiler_identity
    from tilelang_core.capabilities import TargetCapability

    marker = tmp_path / "version.json"
    marker.write_text('{"cuda": "13.0"}')
    monkeypatch.setenv("TL_TEST_TOOLKIT", str(tmp_path))
    cap = schema.validate_python(TargetCapability, {
        "priority": 1, "consumes": ["device_source"],
        "library_toolchain": {"name": "JIT", "distributions": ["pluggy", "no-such-dist-xyz"],
                              "env": ["TL_TEST_TOOLKIT"], "files": ["$TL_TEST_TOOLKIT/version.json"]},
    })
    first = native_compiler_identity(cap)
    assert f"pluggy=={version('pluggy')}" in first and "no-such-dist-xyz: not installed" in first
    marker.write_text('{"cuda": "13.1"}')
    second = native_compiler_identity(cap)
    assert second != first
    monkeypatch.setenv("TL_TEST_TOOLKIT", str(tmp_path / "elsewhere"))
    third = native_compiler_identity(cap)
    assert third not in (first, second) and "version.json: missing" in third


def test_cuda_target_without_arch_gets_the_documented_default(monkeypatch, capfd):
    from tilelang_core.lowering import lower, resolve_target
    from tilelang_core.lowering.target import DEFAULT_CUDA_ARCH, default_cuda_arch, target_string

    monkeypatch.delenv("TILELANG_CUDA_ARCH", raising=False)
    expected = default_cuda_arch()
    try:
        import torch

        if not torch.cuda.is_available():
            assert expected == DEFAULT_CUDA_ARCH == "sm_80"
    except ImportError:  # pragma: no cover
        pass
    for given in ("cuda", {"kind": "cuda"}, '{"kind": "cuda"}'):
        assert target_string(resolve_target(given)) == f"cuda -arch={expected}"
    artifact = lower(add_one(8), target="cuda")
    assert artifact.arch == expected and artifact.target == f"cuda -arch={expected}"
    assert "Unable to detect CUDA version" not in capfd.readouterr().err
    assert lower(add_one(8), target="c").arch is None


def test_cuda_arch_from_the_environment(monkeypatch):
    from tilelang_core.lowering import resolve_target
    from tilelang_core.lowering.target import target_string

    monkeypatch.setenv("TILELANG_CUDA_ARCH", "9.0")
    assert target_string(resolve_target("cuda")) == "cuda -arch=sm_90"
    assert target_string(resolve_target("cuda -arch=sm_86")) == "cuda -arch=sm_86"  # the target wins
    for bad in ("volta", "2", "sm_2", "sm_0", "sm_1000", "99999999999999999999", "0.9"):
        # numbers no GPU has: they stopped in TVM's code generator (an error at the kernel's line) or nvcc
        monkeypatch.setenv("TILELANG_CUDA_ARCH", bad)
        with pytest.raises(TargetError, match=rf"\$TILELANG_CUDA_ARCH='{bad}' is not a CUDA architecture"):
            resolve_target("cuda")
    for good, arch in (("sm_100a", "sm_100a"), ("120", "sm_120"), ("12.0", "sm_120"), ("sm_75", "sm_75")):
        monkeypatch.setenv("TILELANG_CUDA_ARCH", good)
        assert target_string(resolve_target("cuda")) == f"cuda -arch={arch}"


def test_a_cuda_runtime_module_is_built_with_tvms_compile_callback_and_the_target_asked_for(monkeypatch):
    """Where TVM's CUDA runtime is loaded, TVM 0.27 compiles the CUDA source while it creates the
    runtime module, through ``tvm_callback_cuda_compile`` with the *current* target's arch: the
    pipeline registers that callback (TVM's, from tvm.support.nvcc) and makes the kernel's target
    current. Checked here with a callback that records what it sees (no CUDA runtime here)."""
    import tvm
    import tvm_ffi

    seen = {}

    def spy_build(host_mod, device_mods, target_host):
        seen["callback"] = tvm_ffi.get_global_func("tvm_callback_cuda_compile", allow_missing=True) is not None
        current = tvm.target.Target.current(allow_none=True)
        seen["arch"] = None if current is None else str(current.attrs.get("arch"))
        return "module"

    import importlib

    monkeypatch.setattr(importlib.import_module("tvm.tirx.build"), "tir_to_runtime", spy_build)
    from tilelang_core.lowering import lower

    artifact = lower(add_one(8), target="cuda -arch=sm_86", consumes=["runtime_module"])
    assert artifact.tvm_modules == "module"
    assert seen == {"callback": True, "arch": "sm_86"}


@pytest.mark.parametrize("backend", ["cython", "tvm_ffi", "nvrtc"])
def test_a_kernel_loaded_where_it_cannot_run_refuses_as_a_compiled_one(backend, tmp_path):
    """The calls of a CUDA kernel that cannot run here start alike, compiled or loaded, on every backend."""
    record = get_registry().get(backend)
    if record is None or not record.usable:
        pytest.skip(f"{backend} is not installed")
    availability = get_registry().probe(record, "cuda")
    if availability.available or not availability.can_build:
        pytest.skip(f"{backend} runs CUDA kernels here, or cannot build them: {availability.reason}")
    compiled = tilelang.compile(add_one(64), out_idx=[1], target="cuda", execution_backend=backend)
    loaded = tilelang.load(compiled.export(tmp_path / "kernel"))
    for kernel in (compiled, loaded):
        with pytest.raises(BackendUnavailableError) as info:
            kernel(torch.ones(64))
        assert str(info.value).startswith("main() cannot run on this machine: "), str(info.value)
