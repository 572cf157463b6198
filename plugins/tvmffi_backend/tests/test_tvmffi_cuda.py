"""CUDA: the module builds (TVM codegen + nvcc compile check) here; launches need a GPU (marked gpu)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest
import torch

from tilelang_core.artifact import BuildOptions
from tilelang_core.errors import BackendUnavailableError
from tilelang_backend_tvmffi import plugin
from tilelang_backend_tvmffi.runtime import export, module_kinds, unwrap_module

HAS_GPU = torch.cuda.is_available()
gpu_only = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device: torch.cuda.is_available() is False")


def _arch() -> str:
    if HAS_GPU:
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    return "sm_80"


@pytest.fixture(scope="module")
def cuda_artifact():
    if importlib.util.find_spec("cuda") is None:  # TVM compiles with nvrtc from cuda-python by default
        os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")
    import _tvmffi_kernels
    import tvm

    from tilelang_backend_tvmffi.testing import artifact_from_prim_func, make_target

    if tvm.get_global_func("target.build.cuda", allow_missing=True) is None:
        pytest.skip("TVM built without CUDA codegen")
    return artifact_from_prim_func(_tvmffi_kernels.vec_add_cuda, target=make_target("cuda", _arch()), name="vec_add")


def test_cuda_module_has_a_device_module_and_compiles_with_nvcc(cuda_artifact, tmp_path):
    mod = unwrap_module(cuda_artifact.tvm_modules)
    assert module_kinds(mod)[:2] == ["llvm", "cuda"]
    assert cuda_artifact.params[0].device == "cuda"
    source = mod.imports[0].inspect_source()
    if not source:  # with a CUDA runtime TVM already compiled it (cubin/fatbin)
        return
    assert 'extern "C" __global__' in source and "vec_add_kernel" in source
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc not found")
    cu = tmp_path / "vec_add.cu"
    cu.write_text(source)
    proc = subprocess.run(
        [nvcc, "-cubin", f"-arch={_arch()}", "-O3", "-o", str(tmp_path / "vec_add.cubin"), str(cu)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "vec_add.cubin").stat().st_size > 0


def test_cuda_module_exports_with_export_library(cuda_artifact, tmp_path):
    export(unwrap_module(cuda_artifact.tvm_modules), tmp_path / "kernel.so")
    assert (tmp_path / "kernel.so").stat().st_size > 0


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without TVM's CUDA runtime")
def test_build_without_cuda_runtime_says_why(cuda_artifact):
    import tvm

    if tvm.runtime.enabled("cuda"):
        pytest.skip("TVM's CUDA runtime is loaded here")
    kernel = plugin.tilelang_backend_build(artifact=cuda_artifact, options=BuildOptions())  # builds here
    with pytest.raises(BackendUnavailableError, match="'cuda' device module cannot run here"):
        kernel(torch.zeros(4), torch.zeros(4), torch.zeros(4))


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without TVM's CUDA runtime")
def test_loading_a_saved_cuda_kernel_without_cuda_runtime_says_why(cuda_artifact, tmp_path):
    """A cache entry written on a GPU machine (simulated: export + plan) cannot load here."""
    import json

    import tvm

    if tvm.runtime.enabled("cuda"):
        pytest.skip("TVM's CUDA runtime is loaded here")
    from tilelang_backend_tvmffi.runtime import LIBRARY_FILE, PLAN_FILE, PLAN_FORMAT

    export(unwrap_module(cuda_artifact.tvm_modules), tmp_path / LIBRARY_FILE)
    (tmp_path / PLAN_FILE).write_text(json.dumps({
        "plan_format": PLAN_FORMAT, "library": LIBRARY_FILE, "entry": "vec_add", "target_kind": "cuda",
        "module_kinds": ["llvm", "cuda"], "alignment": 64, "out_idx": [],
    }))
    kernel = plugin.tilelang_backend_load(artifact=cuda_artifact, directory=tmp_path, options=BuildOptions())
    with pytest.raises(BackendUnavailableError, match="cuda"):
        kernel(torch.zeros(4), torch.zeros(4), torch.zeros(4))
    again = tmp_path / "again"  # it can be saved again (a cache entry copied elsewhere)
    again.mkdir()
    plugin.tilelang_backend_save(kernel=kernel, directory=again)
    assert (again / LIBRARY_FILE).stat().st_size == (tmp_path / LIBRARY_FILE).stat().st_size


def _fatbin_entries(code: bytes) -> set:
    """``{(kind, sm)}`` of a CUDA fat binary: kind "elf" (machine code) or "ptx", for sm ``XX``."""
    import struct

    magic, _, header, size = struct.unpack_from("<IHHQ", code, 0)
    assert magic == 0xBA55ED50, "not a CUDA fat binary"
    entries, offset = set(), header
    while offset < header + size:
        kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", code, offset)
        (sm,) = struct.unpack_from("<I", code, offset + 28)
        entries.add(({1: "ptx", 2: "elf"}[kind], sm))
        offset += entry_header + entry_size
    return entries


@pytest.mark.skipif(HAS_GPU, reason="checks a kernel built where TVM keeps CUDA source")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_saved_cuda_kernel_carries_compiled_code_that_tvms_loader_is_served(cuda_artifact, tmp_path):
    """Without a CUDA runtime TVM keeps the CUDA source in the module, and its loader compiles it
    where the kernel loads through tvm_callback_cuda_compile (TVM's Python package): saving
    compiles it here for the kernel's arch (machine code and PTX), and loading hands TVM's loader
    that code."""
    import hashlib
    import json

    import tvm_ffi

    from tilelang_backend_tvmffi import cuda_binaries
    from tilelang_backend_tvmffi.runtime import LIBRARY_FILE, PLAN_FILE

    kernel = plugin.tilelang_backend_build(artifact=cuda_artifact, options=BuildOptions())  # builds here
    saved = tmp_path / "saved"
    saved.mkdir()
    plugin.tilelang_backend_save(kernel=kernel, directory=saved)
    plan = json.loads((saved / PLAN_FILE).read_text())
    source = unwrap_module(cuda_artifact.tvm_modules).imports[0].inspect_source("cuda")
    key = hashlib.sha256(str(source).encode()).hexdigest()
    assert plan["cuda_binaries"] == [{"source_sha256": key, "file": f"cuda-{key}.fatbin", "arch": _arch()}]
    code = (saved / f"cuda-{key}.fatbin").read_bytes()
    sm = int(_arch()[3:])
    assert _fatbin_entries(code) == {("elf", sm), ("ptx", sm)}  # PTX: newer GPUs run it too
    assert str(source).encode() in (saved / LIBRARY_FILE).read_bytes()  # what the loader will pass

    # while TVM's loader reads the library, the callback it calls for the source serves that code
    binaries = cuda_binaries.read_binaries(plan["cuda_binaries"], saved)
    before = tvm_ffi.get_global_func(cuda_binaries.CALLBACK, allow_missing=True)
    with cuda_binaries.serving(binaries):
        assert bytes(tvm_ffi.get_global_func(cuda_binaries.CALLBACK)(str(source))) == code
    after = tvm_ffi.get_global_func(cuda_binaries.CALLBACK, allow_missing=True)
    assert (after is None) == (before is None)  # the earlier callback (TVM's or none) is back
    loaded = plugin.tilelang_backend_load(artifact=cuda_artifact, directory=saved, options=BuildOptions())
    with pytest.raises(BackendUnavailableError, match="cuda"):  # still no CUDA runtime here
        loaded(torch.zeros(4), torch.zeros(4), torch.zeros(4))
    again = tmp_path / "again"  # saved again from the loaded kernel: the code goes along
    again.mkdir()
    plugin.tilelang_backend_save(kernel=loaded, directory=again)
    assert json.loads((again / PLAN_FILE).read_text())["cuda_binaries"] == plan["cuda_binaries"]
    assert (again / f"cuda-{key}.fatbin").read_bytes() == code


@pytest.mark.skipif(HAS_GPU, reason="checks kernels built where TVM keeps CUDA source")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_one_source_saved_for_two_archs_gets_code_for_each(cuda_artifact, tmp_path):
    """The CUDA source does not depend on the arch: the code saved with a kernel built for sm_90
    must not be the one compiled earlier for the same source's sm_80 kernel (seen on an H200:
    CUDA_ERROR_NO_BINARY_FOR_GPU)."""
    import json

    import _tvmffi_kernels

    from tilelang_backend_tvmffi.runtime import PLAN_FILE
    from tilelang_backend_tvmffi.testing import artifact_from_prim_func, make_target

    sms = {}
    for arch in ("sm_80", "sm_90"):
        artifact = artifact_from_prim_func(_tvmffi_kernels.vec_add_cuda, target=make_target("cuda", arch), name="vec_add")
        kernel = plugin.tilelang_backend_build(artifact=artifact, options=BuildOptions())
        folder = tmp_path / arch
        folder.mkdir()
        plugin.tilelang_backend_save(kernel=kernel, directory=folder)
        (entry,) = json.loads((folder / PLAN_FILE).read_text())["cuda_binaries"]
        sms[arch] = (entry["source_sha256"], _fatbin_entries((folder / entry["file"]).read_bytes()))
    assert sms["sm_80"][0] == sms["sm_90"][0]  # one source
    assert sms["sm_80"][1] == {("elf", 80), ("ptx", 80)} and sms["sm_90"][1] == {("elf", 90), ("ptx", 90)}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_code_saved_for_an_architecture_specific_target_compiles():
    """The fat binary saved for ``sm_100a`` holds sm_100a code and PTX only: ``-arch=sm_100a`` also
    assembled the portable compute_100 PTX, which refused the ``.rs`` conversions of
    ``T.cast(..., round="rs")``, so such a kernel could not be saved."""
    import tilelang.language as T

    from tilelang_backend_tvmffi.cuda_binaries import compile_source
    from tilelang_core.lowering import lower

    @T.prim_func
    def rs_cast(A: T.Tensor((64,), "float32"), R: T.Tensor((64,), "uint32"), B: T.Tensor((64,), "bfloat16")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = T.cast(A[i], "bfloat16", round="rs", sat=True, rbits=R[i])

    source = lower(rs_cast, target="cuda -arch=sm_100a").device_source
    assert "cvt.rs" in source
    assert _fatbin_entries(compile_source(source, "sm_100a")) == {("elf", 100), ("ptx", 100)}


@pytest.mark.parametrize("entries, message", [
    ("cubin", "invalid cuda_binaries"),
    ([{"source_sha256": "ab", "file": "cuda-ab.fatbin"}], "invalid cuda_binaries entry"),
    ([{"source_sha256": "0" * 64, "file": "../kernel.so"}], "invalid cuda_binaries entry"),
    ([{"source_sha256": "0" * 64, "file": "cuda-" + "0" * 64 + ".fatbin"}], "the saved kernel is incomplete"),
])
def test_a_plan_with_bad_cuda_binaries_is_refused(tmp_path, entries, message):
    from tilelang_core.errors import ArtifactError

    from tilelang_backend_tvmffi.cuda_binaries import read_binaries

    with pytest.raises(ArtifactError, match=message):
        read_binaries(entries, tmp_path)


# --- launches (need a GPU) ------------------------------------------------------------------


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("n", [1, 1000, 4097])
def test_gpu_vec_add_matches_torch(cuda_artifact, n):
    k = plugin.tilelang_backend_build(artifact=cuda_artifact, options=BuildOptions(out_idx=[2]))
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = k(a, b)
    assert c.device == a.device
    torch.testing.assert_close(c, a + b)


@pytest.mark.gpu
@gpu_only
def test_gpu_launch_uses_torch_current_stream_and_stream_argument(cuda_artifact):
    k = plugin.tilelang_backend_build(artifact=cuda_artifact, options=BuildOptions(out_idx=[2]))
    n = 1 << 20
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = k(a, b)
    s.synchronize()
    torch.testing.assert_close(c, a + b)
    s2 = torch.cuda.Stream()
    c2 = k(a, b, stream=s2)
    s2.synchronize()
    torch.testing.assert_close(c2, a + b)
    c3 = k(a, b, stream=s2.cuda_stream)
    s2.synchronize()
    torch.testing.assert_close(c3, a + b)


@pytest.mark.gpu
@gpu_only
def test_gpu_cuda_graph_capture(cuda_artifact):
    k = plugin.tilelang_backend_build(artifact=cuda_artifact, options=BuildOptions())
    a, b, c = (torch.randn(4096, device="cuda") for _ in range(3))
    k(a, b, c)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        k(a, b, c)
    a.fill_(1.0)
    b.fill_(2.0)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, torch.full_like(c, 3.0))


@pytest.mark.gpu
@gpu_only
def test_gpu_bad_calls_use_the_contract_messages(cuda_artifact):
    k = plugin.tilelang_backend_build(artifact=cuda_artifact, options=BuildOptions(out_idx=[2]))
    with pytest.raises(ValueError) as info:
        k(torch.randn(8), torch.randn(8, device="cuda"))
    assert str(info.value) == "vec_add() argument 'A' (#0): expected a tensor on cuda, got cpu"
    with pytest.raises(ValueError) as info:
        k(torch.randn(8, device="cuda"), torch.randn(9, device="cuda"))
    assert str(info.value) == (
        "vec_add() argument 'B' (#1): shape[0] binds symbol 'n' = 9, but argument 'A' bound it to 8"
    )


def test_a_source_without_saved_code_fails_with_advice_where_no_compiler_is_registered():
    """In a process without TVM (as on a GPU machine running a kit), a CUDA source the saved
    kernel has no compiled code for cannot be compiled: TVM's loader gets an error saying what to do."""
    code = (
        "import tvm_ffi\n"
        "from tilelang_backend_tvmffi.cuda_binaries import CALLBACK, serving, source_key\n"
        "assert tvm_ffi.get_global_func(CALLBACK, allow_missing=True) is None\n"
        "with serving({source_key('known'): b'CUBIN'}):\n"
        "    f = tvm_ffi.get_global_func(CALLBACK)\n"
        "    assert bytes(f('known')) == b'CUBIN'\n"
        "    try:\n"
        "        f('__global__ void other() {}')\n"
        "    except Exception as exc:\n"
        "        print('ERROR', exc)\n"
        "assert tvm_ffi.get_global_func(CALLBACK, allow_missing=True) is None\n"
        "import sys; print('tvm' in sys.modules)\n"
    )
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "holds CUDA source without compiled code" in out.stdout and "save the kernel again" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "False"
