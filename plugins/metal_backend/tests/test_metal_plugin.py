"""The metal plugin as the core sees it: declaration, probe, selection, build refusals and errors.

This machine is Linux: the backend is *build only* here ("macOS only"), so kernels build, cache and
export, and calling one says that it needs macOS with MPS.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import (
    BackendNotInstalledError,
    BackendTargetUnsupportedError,
    BackendUnavailableError,
    BuildError,
    CompileFlagsError,
    KernelNotSupportedError,
)

import metal_kernels as MK

ON_MAC_WITH_MPS = sys.platform == "darwin" and torch.backends.mps.is_available()
linux_only = pytest.mark.skipif(sys.platform == "darwin", reason="checks the answers on a machine that is not a Mac")


def vector_add(N, block=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def _record():
    from tilelang_core.backends import get_registry

    return get_registry().get("metal")


def test_declaration():
    record = _record()
    assert record is not None and record.status == "ok", record and record.reason
    assert record.distribution == "tilelang-backend-metal" and list(record.spec.targets) == ["metal"]
    cap = record.spec.targets["metal"]
    assert cap.consumes == ["device_source"] and cap.device_language == "metal"
    assert cap.platforms == ["darwin"] and cap.build_platforms == "all"
    assert cap.compiles_at_load and cap.dynamic_shapes and cap.allocates_outputs and not cap.cuda_streams
    assert "float64" not in cap.dtypes and {"float16", "bfloat16", "bool", "int64"} <= set(cap.dtypes)
    assert record.spec.supersedes == ["torch"]


def test_entry_point_module_imports_nothing_heavy():
    code = (
        "import sys, tilelang_backend_metal.plugin as p; p.tilelang_backend_spec(); "
        "heavy = sorted(m for m in ('torch', 'tvm', 'numpy') if m in sys.modules); print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@linux_only
def test_probe_says_build_only_macos_only():
    from tilelang_core.backends import get_registry

    registry = get_registry()
    answer = registry.probe(_record(), "metal")
    assert not answer.available and answer.can_build and answer.build_only
    assert answer.reason.startswith("macOS only") and sys.platform in answer.reason


def test_probe_reasons_of_the_runtime(monkeypatch):
    """The two reasons: not a Mac; a Mac whose torch has no usable MPS device."""
    from tilelang_backend_metal import runtime

    monkeypatch.setattr(runtime.sys, "platform", "linux")
    assert runtime.mps_problem().startswith("macOS only")
    monkeypatch.setattr(runtime.sys, "platform", "darwin")
    monkeypatch.setattr(torch.backends.mps, "is_built", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert runtime.mps_problem().startswith("torch has no MPS") and "is_available() is false" in runtime.mps_problem()
    monkeypatch.setattr(torch.backends.mps, "is_built", lambda: False)
    assert runtime.mps_problem().startswith("torch has no MPS") and "built without MPS" in runtime.mps_problem()


@linux_only
def test_auto_never_picks_metal_where_it_cannot_run():
    from tilelang_core.backends import explain_selection

    verdicts = {c.name: c for c in explain_selection("metal")}
    assert verdicts["metal"].verdict == "build_only" and "macOS only" in verdicts["metal"].reason


def test_upstream_name_torch_points_at_metal():
    with pytest.raises(BackendNotInstalledError, match=r"execution_backend='metal'"):
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="torch", target="metal")


@pytest.mark.skipif(ON_MAC_WITH_MPS, reason="checks calls on a machine without MPS")
def test_named_backend_builds_and_the_call_says_it_needs_macos_with_mps():
    kernel = tilelang.compile(vector_add(T.dynamic("n")), out_idx=-1, execution_backend="metal", target="metal")
    assert kernel.backend.name == "metal" and kernel.cannot_run is not None
    with pytest.raises(BackendUnavailableError, match="export the kernel"):
        kernel(torch.zeros(10), torch.zeros(10))
    with pytest.raises(BackendUnavailableError, match="need macOS with torch.s MPS device.*tilelang.load"):
        kernel.runner(torch.zeros(10), torch.zeros(10))  # the backend's own callable says so too
    assert kernel.runner.get_source() == kernel.get_kernel_source()


def test_other_targets_are_refused_by_selection():
    with pytest.raises(BackendTargetUnsupportedError, match="does not support target 'c'"):
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="metal", target="c")


def test_compile_flags_are_refused():
    with pytest.raises(CompileFlagsError, match="torch.mps.compile_shader takes none"):
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="metal", target="metal", compile_flags="-O3")


def _artifact(func=None):
    from tilelang_core.lowering import lower

    return lower(func or MK.scaled("float16"), target="metal")


def _build(artifact, out_idx=()):
    from tilelang_core.artifact import BuildOptions

    from tilelang_backend_metal import plugin

    return plugin.tilelang_backend_build(artifact=artifact, options=BuildOptions(out_idx=list(out_idx)))


def test_dynamic_threadgroup_memory_is_refused():
    artifact = _artifact()
    kernel = artifact.device_kernels[0]
    launch = kernel.launch.__class__(grid=kernel.launch.grid, block=kernel.launch.block, dynamic_shared_memory=1024)
    edited = artifact.replace(device_kernels=[kernel.__class__(**{**kernel.__dict__, "launch": launch})])
    with pytest.raises(KernelNotSupportedError, match="1024 bytes of dynamic threadgroup memory"):
        _build(edited)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("[[ buffer(1) ]]", "[[ buffer(5) ]]", r"buffer\(1\) should be 'device float\*' for argument 'Y'"),
        ("device float* X_ptr", "device half* X_ptr", r"buffer\(0\) should be 'device float\*'"),
        ("constant scaled_kernel_kernel_args_t& arg", "constant other_t& arg", "should be 'constant scaled_kernel_kernel_args_t&'"),
        (" half v_half;\n", "", "reads arg.s.v_half, which union __TVMArgUnion does not declare"),
        ("kernel void scaled_kernel_kernel(", "kernel void renamed(", "has no kernel 'scaled_kernel_kernel'"),
        ("  __TVMArgUnion s;\n", "  int s[2];\n", "struct member 's' is int\\[2\\], a float16 slot needs __TVMArgUnion"),
    ],
)
def test_source_that_does_not_declare_what_the_artifact_says_is_a_build_error(old, new, message):
    artifact = _artifact()
    assert old in artifact.device_source
    edited = artifact.device_source.replace(old, new, 1)
    with pytest.raises(BuildError, match=message) as info:
        _build(artifact.replace(device_source=edited))
    with open(info.value.source) as f:  # the source is kept for inspection
        assert f.read() == edited
    os.unlink(info.value.source)


def test_artifact_without_scalar_layout_is_refused_with_advice():
    artifact = _artifact()
    kernel = artifact.device_kernels[0]
    old = artifact.replace(device_kernels=[kernel.__class__(**{**kernel.__dict__, "scalar_struct": None})])
    with pytest.raises(BuildError, match="does not describe its scalar struct") as info:
        _build(old)
    os.unlink(info.value.source)  # kept for inspection, as for every source the build refuses
