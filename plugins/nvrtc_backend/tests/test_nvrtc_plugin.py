"""The nvrtc plugin as the core sees it: declaration, probe, selection, build errors, calls here.

This machine has NVRTC (wheels) but no CUDA driver: the backend is *build only* here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import BackendUnavailableError, BuildError, CompileFlagsError

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


def test_an_arch_that_is_not_one_is_named_in_the_build_error():
    with pytest.raises(BuildError) as info:
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda -arch=sm_90x")
    assert str(info.value) == (
        "nvrtc: kernel 'main': target 'cuda -arch=sm_90x' names the architecture 'sm_90x', which is not a CUDA "
        "architecture; -arch= takes sm_XX (e.g. sm_90), sm_XXa for architecture-specific code (e.g. sm_90a) or "
        "sm_XXf for a family (e.g. sm_100f): compile with target='cuda -arch=sm_XX'")


def test_a_variant_nvrtc_does_not_know_is_a_build_error_listing_those_it_knows():
    """sm_90 exists, sm_90f (a family build) does not: NVRTC's own "invalid or no value specified
    with --nv_arch flag" became the kernel's compile error."""
    with pytest.raises(BuildError) as info:
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda -arch=sm_90f")
    message = str(info.value)
    assert re.search(r"^NVRTC \d+\.\d+ cannot compile kernel 'main' for sm_90f; it supports sm_75, .*sm_90, sm_90a, "
                     r"sm_100, sm_100a, sm_100f, .*\. Choose one of them with target='cuda -arch=sm_XX'$", message), message
    assert "sm_90f," not in message and "nv_arch" not in message
    assert tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc",
                            target="cuda -arch=sm_100f").runner.plan["arch"] == "sm_100f"


@pytest.mark.parametrize("flags", [["-arch=sm_80"], ["--gpu-architecture=sm_80"], ["-lineinfo", "-arch", "sm_80"],
                                   "--gpu-architecture sm_80"])
def test_compile_flags_that_choose_the_architecture_are_refused(flags):
    """NVRTC takes the last architecture given: the cubin was for sm_80 under a plan for sm_90, and
    every load of it failed."""
    with pytest.raises(CompileFlagsError) as info:
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda -arch=sm_90",
                         compile_flags=flags)
    message = str(info.value)
    assert message.startswith("compile_flags [") and "choose the GPU architecture ('" in message, message
    assert "kernel 'main' is built for sm_90" in message, message
    assert message.endswith("from compile_flags and compile with target='cuda -arch=sm_80'"), message


def test_a_cubin_for_another_architecture_than_the_plan_is_a_build_error(monkeypatch):
    """Should NVRTC ever build for another architecture than asked, the build says so (load did)."""
    from tilelang_backend_nvrtc import compiler
    from tilelang_backend_nvrtc.arch import Arch

    real = compiler.compile_cubin

    def for_sm_80(name, source, arch, flags=(), *, verbose=False):
        return real(name, source, Arch.parse("sm_80"), flags, verbose=verbose)

    monkeypatch.setattr(compiler, "compile_cubin", for_sm_80)
    with pytest.raises(BuildError, match=r"^nvrtc: kernel 'main': the cubin is for sm_80, the plan says sm_90$"):
        tilelang.compile(vector_add(256), out_idx=-1, execution_backend="nvrtc", target="cuda -arch=sm_90")


def test_a_long_nvrtc_log_is_kept_to_its_start_and_end_and_whole_in_a_file(request):
    """100000 warnings before the error: NVRTC's log is 13 MB, the BuildError keeps its first and
    last 32 KiB (as for every compiler, tilelang_core.compiler_process) and says where all of it is."""
    from tilelang_core.compiler_process import OUTPUT_HEAD, OUTPUT_TAIL

    from tilelang_backend_nvrtc.arch import Arch
    from tilelang_backend_nvrtc.compiler import compile_cubin

    source = "".join(f'#warning "noisy {i}"\n' for i in range(100000)) + "#error stop\n"
    with pytest.raises(BuildError) as info:
        compile_cubin("noisy", source, Arch.parse("sm_90"))
    err = info.value
    whole = Path(err.source_path).with_name("compiler-output.txt")
    request.addfinalizer(lambda: shutil.rmtree(whole.parent, ignore_errors=True))  # 17 MB kept for nobody
    assert len(err.output) < OUTPUT_HEAD + OUTPUT_TAIL + 200 and len(str(err)) < len(err.output) + 2000
    assert err.output in str(err) and '"noisy 0"' in err.output and "#error directive: stop" in err.output
    left_out = re.search(r"\n\[\.\.\. (\d+) bytes of compiler output left out here; all of it is in (.+) \.\.\.\]\n",
                         err.output)
    assert left_out and left_out.group(2) == str(whole), err.output[OUTPUT_HEAD - 200:OUTPUT_HEAD + 400]
    log = whole.read_text()
    assert '"noisy 50000"' in log and log.startswith(err.output[:1000]) and log.rstrip().endswith(err.output[-1000:])
    assert int(left_out.group(1)) == len(log.encode()) - OUTPUT_HEAD - OUTPUT_TAIL


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
