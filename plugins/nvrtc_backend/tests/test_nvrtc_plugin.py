"""The nvrtc plugin as the core sees it: declaration, probe, selection, build errors, calls here.

This machine has NVRTC (wheels) but no CUDA driver: the backend is *build only* here.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import BackendUnavailableError, BuildError

NO_GPU = not torch.cuda.is_available()


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


def test_declaration_is_valid_and_cheap():
    from tilelang_core.backends import get_registry

    record = get_registry().get("nvrtc")
    assert record is not None and record.status == "ok", record and record.reason
    cap = record.spec.targets["cuda"]
    assert list(record.spec.targets) == ["cuda"]
    assert cap.consumes == ["device_source"] and cap.device_language == "cuda"
    assert cap.cuda_streams and cap.platforms == ["linux"] and cap.native_compiler is None
    assert cap.library_toolchain.name == "NVRTC" and "nvidia-cuda-nvrtc" in cap.library_toolchain.distributions
    assert record.distribution == "tilelang-backend-nvrtc"


def test_toolchain_identity_goes_into_the_cache_key():
    from importlib.metadata import version

    from tilelang_core.backends import get_registry
    from tilelang_core.cache.key import native_compiler_identity

    cap = get_registry().get("nvrtc").spec.targets["cuda"]
    ident = native_compiler_identity(cap)
    assert f"nvidia-cuda-nvrtc=={version('nvidia-cuda-nvrtc')}" in ident and "library NVRTC" in ident


@pytest.mark.skipif(not NO_GPU, reason="checks the answer on a machine without a CUDA driver")
def test_probe_says_build_only_without_a_driver():
    from tilelang_core.backends import get_registry

    registry = get_registry()
    answer = registry.probe(registry.get("nvrtc"), "cuda")
    assert not answer.available and answer.can_build and answer.build_only
    assert answer.reason.startswith("no CUDA driver on this machine") and "libcuda.so.1" in answer.reason


@pytest.mark.skipif(not NO_GPU, reason="checks auto on a machine without a CUDA driver")
def test_auto_never_picks_a_backend_that_cannot_run():
    from tilelang_core.backends import explain_selection

    verdicts = {c.name: c for c in explain_selection("cuda")}
    assert verdicts["nvrtc"].verdict == "build_only" and "no CUDA driver" in verdicts["nvrtc"].reason
    assert all(c.verdict != "chosen" for c in verdicts.values() if c.name == "nvrtc")


@pytest.mark.skipif(not NO_GPU, reason="checks calls on a machine without a CUDA driver")
def test_named_backend_builds_here_and_the_call_says_what_is_missing(tmp_path):
    kernel = tilelang.compile(vector_add(T.dynamic("n")), out_idx=-1, execution_backend="nvrtc",
                              target="cuda -arch=sm_90")
    assert kernel.backend.name == "nvrtc" and kernel.artifact.arch == "sm_90"
    assert kernel.runner.cubin[:4] == b"\x7fELF"
    with pytest.raises(BackendUnavailableError) as info:
        kernel(torch.zeros(10), torch.zeros(10))
    message = str(info.value)
    assert "no CUDA driver on this machine" in message
    assert "export the kernel" in message and "where there is a GPU" in message
    with pytest.raises(BackendUnavailableError, match="no CUDA driver on this machine.*export the kernel"):
        kernel.runner(torch.zeros(10), torch.zeros(10))  # the backend's own callable says the same
    kernel.export(tmp_path / "k")
    assert (tmp_path / "k" / "backend" / "kernel.cubin").read_bytes() == kernel.runner.cubin


def test_target_without_arch_gets_the_documented_default_not_sm_50(monkeypatch):
    monkeypatch.delenv("TILELANG_CUDA_ARCH", raising=False)
    kernel = tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda")
    expected = "sm_80" if NO_GPU else "sm_{}{}".format(*torch.cuda.get_device_capability())
    assert kernel.artifact.arch == expected and kernel.artifact.target == f"cuda -arch={expected}"
    assert kernel.runner.plan["arch"] == expected


def test_arch_from_environment(monkeypatch):
    monkeypatch.setenv("TILELANG_CUDA_ARCH", "8.6")
    kernel = tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda")
    assert kernel.artifact.arch == "sm_86" and kernel.artifact.compute_capability == (8, 6)


def test_an_architecture_nvrtc_does_not_know_is_a_clear_build_error():
    with pytest.raises(BuildError, match=r"cannot compile kernel 'main' for sm_50; it supports sm_75, .*sm_90"):
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda -arch=sm_50")


def test_compile_error_carries_options_log_and_kept_source():
    from tilelang_core.artifact import BuildOptions
    from tilelang_core.lowering import lower

    from tilelang_backend_nvrtc import plugin

    artifact = lower(vector_add(256), target="cuda -arch=sm_90")
    broken = artifact.replace(device_source=artifact.device_source.replace("C_ptr[", "no_such_name[", 1))
    with pytest.raises(BuildError) as info:
        plugin.tilelang_backend_build(artifact=broken, options=BuildOptions())
    err = info.value
    assert "NVRTC failed to compile kernel 'main' for sm_90" in str(err)
    assert "--gpu-architecture=sm_90" in str(err) and "-std=c++17" in str(err)
    assert "no_such_name" in err.output and "identifier" in err.output
    with open(err.source_path) as f:
        assert "no_such_name[" in f.read()


def test_cpu_target_is_refused_by_selection():
    from tilelang_core.errors import BackendTargetUnsupportedError

    with pytest.raises(BackendTargetUnsupportedError, match="does not support target 'c'"):
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="c")
