"""Programmatic dependent launch: ``T.pdl_trigger()`` and ``T.pdl_sync()`` (lowering/pdl.py).

Before, a kernel using them stopped with "module 'tilelang_core.language' has no attribute
'pdl_sync'". Now: on CPU targets they do nothing (launches are serialized) and a producer and a
dependent kernel in one ``T.prim_func`` give torch's result on the three CPU paths. On CUDA they
are helper calls whose ``griddepcontrol`` PTX is under ``__CUDA_ARCH__ >= 900``: the source
compiles with ``nvcc -c`` and NVRTC for sm_90 (the PTX holds the instructions) and sm_80 (it
does not). A kernel that waits has no ``__restrict__`` pointer parameters and no ``__ldg``;
the others keep theirs. Arguments and use as a value are errors at the kernel line. The two
kernels also run one after the other on the emulated GPU of tests/test_tileops_cuda.py, with
the real helpers (empty there, as below sm_90).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from nvrtc_toolchain import nvrtc_available  # noqa: E402
from private_modules import load_private  # noqa: E402
from source_lines import marked_line  # noqa: E402

CU = load_private("test_tileops_cuda", "pdl_test_tileops_cuda")  # nvcc lookup, the GPU emulator (a private copy)

N, BLOCK = 200, 64


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


def _pipeline(ldg: bool = True):
    """A producer (``B = A + 1``, then the trigger) and a dependent kernel (the wait, then
    ``C = 2 * B``, ``D = 3 * A``, read through ``T.__ldg`` when ``ldg``) in one prim_func.
    CPU targets refuse ``T.__ldg`` (a GPU intrinsic): they get ``ldg=False``."""
    read = T.__ldg if ldg else (lambda element: element)

    @T.prim_func
    def pipeline(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32"),
                 D: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    B[bx * BLOCK + i] = A[bx * BLOCK + i] + 1.0
            T.pdl_trigger()
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx2:
            T.pdl_sync()
            for i in T.Parallel(BLOCK):
                if bx2 * BLOCK + i < N:
                    C[bx2 * BLOCK + i] = B[bx2 * BLOCK + i] * 2.0
                    D[bx2 * BLOCK + i] = read(A[bx2 * BLOCK + i]) * 3.0

    return pipeline


def _ldg_only():
    """One kernel with ``T.__ldg`` and no PDL: it keeps ``__restrict__`` and ``__ldg``."""

    @T.prim_func
    def plain(A: T.Tensor((N,), "float32"), D: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    D[bx * BLOCK + i] = T.__ldg(A[bx * BLOCK + i]) * 3.0

    return plain


def _inputs():
    torch.manual_seed(0)
    a = torch.randn(N)
    return a, torch.full((N,), float("nan")), torch.full((N,), float("nan")), torch.full((N,), float("nan"))


def _check(a, b, c, d):
    torch.testing.assert_close(b, a + 1.0, rtol=0, atol=0)
    torch.testing.assert_close(c, (a + 1.0) * 2.0, rtol=0, atol=0)
    torch.testing.assert_close(d, a * 3.0, rtol=0, atol=0)


# -- CPU targets: nothing to do ------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_cpu_paths_run_the_pipeline(path):
    a, b, c, d = _inputs()
    compile_on(_pipeline(ldg=False), path)(a, b, c, d)
    _check(a, b, c, d)


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_cpu_source_has_nothing_of_pdl(target):
    source = lower(_pipeline(ldg=False), target=target).kernel_source
    assert "pdl" not in source and "griddepcontrol" not in source


# -- CUDA source ---------------------------------------------------------------------------------

def _kernel_text(source: str, name: str) -> str:
    """The definition of kernel ``name`` (signature and body) in ``source``."""
    start = re.search(r"__global__ void __launch_bounds__\(\d+\) " + re.escape(name) + r"\([^)]*\) \{", source)
    assert start, source
    end = source.find("\n}\n", start.end())
    return source[start.start():end + 2]


@pytest.fixture(scope="module")
def sm90():
    return lower(_pipeline(), target="cuda -arch=sm_90")


def test_cuda_source_calls_the_helpers_in_place(sm90):
    src = sm90.device_source
    names = [k.name for k in sm90.device_kernels]
    assert len(names) == 2, names
    producer, consumer = (_kernel_text(src, n) for n in names)
    assert "tl_pdl_trigger();" in producer and "tl_pdl_sync" not in producer
    assert "tl_pdl_sync();" in consumer and "tl_pdl_trigger" not in consumer
    # the trigger after the producer's stores, the wait before the consumer's first load
    assert producer.index("tl_pdl_trigger();") > producer.index("B_ptr[")
    body = consumer[consumer.index("{"):]
    assert body.index("tl_pdl_sync();") < body.index("B_ptr[") and body.index("tl_pdl_sync();") < body.index("A_ptr[")
    for helper, ptx in (("tl_pdl_sync", "griddepcontrol.wait;"), ("tl_pdl_trigger", "griddepcontrol.launch_dependents;")):
        definition = src[src.index(f"void {helper}() {{"):]
        definition = definition[: definition.index("\n}\n")]
        assert "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)" in definition, definition
        assert f'asm volatile("{ptx}" : : : "memory");' in definition, definition


def test_a_waiting_kernel_has_no_restrict_and_no_ldg(sm90):
    src = sm90.device_source
    producer, consumer = (_kernel_text(src, k.name) for k in sm90.device_kernels)
    assert "__restrict__" not in consumer, consumer
    assert "__ldg" not in consumer, consumer
    assert "A_ptr[" in consumer  # the T.__ldg load, now a plain one
    # the declarations before the definitions agree
    for k in sm90.device_kernels[1:]:
        decl = re.search(re.escape(k.name) + r"\([^)]*\);", src).group(0)
        assert "__restrict__" not in decl, decl
    # a kernel that does not wait keeps them, in the same module and alone
    assert producer.count("__restrict__") == 2, producer
    plain = lower(_ldg_only(), target="cuda -arch=sm_90").device_source
    assert "__restrict__" in plain and "__ldg(" in plain


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_cuda_source_compiles_with_nvcc(arch, tmp_path):
    """``nvcc -c`` for both; the PTX holds the griddepcontrol instructions for sm_90 only."""
    src = lower(_pipeline(), target=f"cuda -arch={arch}").device_source
    cu = tmp_path / "pdl.cu"
    cu.write_text(src)
    for kind, out in (("-c", "pdl.o"), ("-ptx", "pdl.ptx")):
        cmd = [CU.NVCC, kind, f"-arch={arch}", "-diag-suppress=177", "-o", str(tmp_path / out), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
    ptx = (tmp_path / "pdl.ptx").read_text()
    found = set(re.findall(r"griddepcontrol\.\w+", ptx))
    if arch == "sm_90":
        assert found == {"griddepcontrol.wait", "griddepcontrol.launch_dependents"}, found
    else:
        assert not found, found


@pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_cuda_source_compiles_with_nvrtc(arch):
    kernel = tilelang.compile(_pipeline(), target=f"cuda -arch={arch}", execution_backend="nvrtc")
    assert "tl_pdl_sync();" in kernel.get_kernel_source()


# -- errors ----------------------------------------------------------------------------------------

def _given_arguments():
    @T.prim_func
    def k(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=BLOCK) as _:
            T.pdl_sync(1)  # <sync-arg>


def _given_keyword():
    @T.prim_func
    def k(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=BLOCK) as _:
            T.pdl_trigger(wait=True)  # <trigger-kw>


def _as_value():
    @T.prim_func
    def k(A: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=BLOCK) as bx:
            A[bx] = T.pdl_sync()  # <sync-value>

    return k


@pytest.mark.parametrize("build, marker, call", [
    (_given_arguments, "sync-arg", "T.pdl_sync(1)"),
    (_given_keyword, "trigger-kw", "T.pdl_trigger(wait=True)"),
])
def test_arguments_are_an_error_at_the_line(build, marker, call):
    with pytest.raises(LoweringError) as info:
        build()
    assert isinstance(info.value, TypeError)  # as Python's own error for a call with extra arguments
    text = str(info.value)
    name = call[: call.index("(")]
    assert text.startswith(f"{_THIS}:{_line_of(marker)}: {call}: {name}() takes no arguments, 1 given"), text


@pytest.mark.parametrize("target", ["c", "llvm", "cuda"])
def test_use_as_a_value_is_an_error_at_the_line(target):
    with pytest.raises(LoweringError, match=re.escape(f"{_THIS}:{_line_of('sync-value')}: T.pdl_sync() is a statement")):
        lower(_as_value(), target=target)


# -- the emulated GPU --------------------------------------------------------------------------

#: What the emulator's header lacks for the helpers: they are compiled as ordinary functions
#: (without __CUDA_ARCH__ they are empty, as below sm_90).
_EMU_EXTRA = "#define __device__\n#define __forceinline__ inline\n"


@CU.emulator
def test_emulated_gpu_runs_the_kernels_one_after_the_other(sm90, tmp_path):
    from tilelang_core.lowering.atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END

    src = sm90.device_source
    helpers = src[src.index(CUDA_HELPERS_BEGIN):src.index(CUDA_HELPERS_END)]
    assert "tl_pdl_sync" in helpers and "tl_pdl_trigger" in helpers
    base = CU._EMU_HEADER
    CU._EMU_HEADER = base + _EMU_EXTRA + helpers + "\n"
    try:
        runs = [CU._emulated(SimpleNamespace(device_source=src, device_kernels=[k], symbols=sm90.symbols), tmp_path)
                for k in sm90.device_kernels]
    finally:
        CU._EMU_HEADER = base
    a, b, c, d = _inputs()
    for run in runs:  # a serialized stream: the dependent kernel starts after the producer
        run(a, b, c, d)
    _check(a, b, c, d)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")
def test_pipeline_on_a_cuda_device():
    """On a GPU (sm_90 and later: the griddepcontrol instructions, in plain launches)."""
    a, b, c, d = (t.cuda() for t in _inputs())
    tilelang.compile(_pipeline(), target="cuda")(a, b, c, d)
    torch.cuda.synchronize()
    _check(a, b, c, d)
