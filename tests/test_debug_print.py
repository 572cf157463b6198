"""``T.print``: in-kernel debug printing (language/tileops/debug_print.py, lowering/debug_print.py).

CPU kernels run on the three CPU paths (cython on ``c``, tvm_ffi on ``c`` and ``llvm``) with torch
tensors; the lines they print to file descriptor 1 (C ``printf``, captured by ``capfd``) are
parsed and checked against the tensors' values: integers exactly, floats by reading the printed
text back into the dtype (bit for bit), buffers of every scope with their multi-dimensional
indices, regions, a dynamic shape, messages, prints in branches and loops, and blocks running in
parallel (every line present and whole). CUDA: the source calls device ``printf`` and compiles
with ``nvcc -c``, and the emulated GPU of tests/test_tileops_cuda.py runs a kernel printing a
fragment (its values are the real ones, read through shared memory), as a ``gpu``-marked test
does on a device. Errors: bad operands when the kernel is defined, Metal and misplaced prints when
it is lowered.
"""

from __future__ import annotations

import ctypes
import math
import pathlib
import re
import sys
import types

import numpy as np
import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.language.tileops._common import OperandCheckError, OperandTypeError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import PATHS, compile_on as _compile, path_id  # noqa: E402

CU = load_private("test_tileops_cuda", "test_tileops_cuda_for_print")  # nvcc lookup, one-translation-unit merge, the GPU emulator

#: One printed line: where it came from, then what was printed.
LINE = re.compile(r"T\.print block=\((\d+), (\d+), (\d+)\)(?: thread=\((\d+), (\d+), (\d+)\))?: (.*)")
#: What a buffer element's line prints after the origin: ``[msg: ]name[i, j] = value``.
ELEMENT = re.compile(r"(?:(.*): )?(\w+)\[([-\d, ]+)\] = (\S+)")




def _run(kernel, capfd, *args) -> list:
    """Run ``kernel(*args)``; its printed lines as ``(block, thread or None, text)``, in order.

    Every line of the output must be a whole ``T.print`` line."""
    capfd.readouterr()
    kernel(*args)
    out = capfd.readouterr().out
    assert out.endswith("\n"), out[-200:]
    lines = []
    for raw in out.splitlines():
        m = LINE.fullmatch(raw)
        assert m, f"not a whole T.print line: {raw!r}"
        thread = tuple(int(g) for g in m.groups()[3:6]) if m.group(4) is not None else None
        lines.append((tuple(int(g) for g in m.groups()[:3]), thread, m.group(7)))
    return lines


def _by_block(lines) -> dict:
    out: dict = {}
    for block, _, text in lines:
        out.setdefault(block, []).append(text)
    return out


def _elements(texts) -> list:
    """``(msg, name, index tuple, value text)`` of buffer-element lines."""
    out = []
    for text in texts:
        m = ELEMENT.fullmatch(text)
        assert m, text
        out.append((m.group(1), m.group(2), tuple(int(i) for i in m.group(3).split(", ")), m.group(4)))
    return out


_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}


def same_value(text: str, value: torch.Tensor) -> bool:
    """Whether printed ``text`` is exactly the 0-d tensor ``value``: integers and booleans as
    printed; floats read back into the dtype, bit for bit (NaN as any NaN)."""
    dtype = value.dtype
    if dtype == torch.bool:
        return text == ("true" if bool(value) else "false")
    if not dtype.is_floating_point:
        return int(text) == int(value.item())
    back = torch.tensor(float(text), dtype=torch.float64).to(dtype)
    if math.isnan(value.item()):
        return math.isnan(back.item())
    return back.view(_BITS[dtype]).item() == value.view(_BITS[dtype]).item()


# -- every dtype --------------------------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64"]
N = 12


def _values(dtype: str) -> torch.Tensor:
    """``N`` values of ``dtype``: its extremes, zero, signs, and for floats the special values."""
    tdt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(len(dtype))
    if dtype == "bool":
        return torch.tensor([True, False] * (N // 2))
    if not tdt.is_floating_point:
        info = torch.iinfo(tdt)
        fixed = [info.min, info.max, 0, 1, info.max - 1, info.min + 1]
        rand = torch.randint(-100 if info.min < 0 else 0, 100, (N - len(fixed),), generator=g).tolist()
        return torch.tensor(fixed + rand, dtype=tdt)
    info = torch.finfo(tdt)
    fixed = [info.max, -info.max, info.tiny, info.tiny * info.eps, -0.0, float("inf"), float("-inf"), float("nan"), 0.1]
    rand = (torch.randn(N - len(fixed), generator=g, dtype=torch.float64) * 1000).tolist()
    return torch.tensor(fixed + rand, dtype=torch.float64).to(tdt)


def dtypes_kernel():
    @T.prim_func
    def every_dtype(
        Xb: T.Tensor((N,), "bool"), Xi8: T.Tensor((N,), "int8"), Xi16: T.Tensor((N,), "int16"),
        Xi32: T.Tensor((N,), "int32"), Xi64: T.Tensor((N,), "int64"), Xu8: T.Tensor((N,), "uint8"),
        Xu16: T.Tensor((N,), "uint16"), Xu32: T.Tensor((N,), "uint32"), Xu64: T.Tensor((N,), "uint64"),
        Xf16: T.Tensor((N,), "float16"), Xbf16: T.Tensor((N,), "bfloat16"), Xf32: T.Tensor((N,), "float32"),
        Xf64: T.Tensor((N,), "float64"),
    ):
        with T.Kernel(1, threads=1) as _:
            T.print(Xb)
            T.print(Xi8)
            T.print(Xi16)
            T.print(Xi32)
            T.print(Xi64)
            T.print(Xu8)
            T.print(Xu16)
            T.print(Xu32)
            T.print(Xu64)
            T.print(Xf16)
            T.print(Xbf16)
            T.print(Xf32)
            T.print(Xf64)
            for i in T.serial(N):
                T.print(Xf32[i])
                T.print(Xu64[i], msg="u64")

    return every_dtype


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_every_dtype_prints_its_exact_value(path, capfd):
    """Integers (int64/uint64 extremes too) exactly; float16/bfloat16/float32/float64 (infinities,
    NaN, subnormals, -0.0, the largest values) read back bit for bit from the printed text. On
    ``llvm`` this shows that the double arguments reach the variadic ``printf`` as doubles."""
    kernel = _compile(dtypes_kernel(), path)
    tensors = [_values(d) for d in DTYPES]
    names = ["Xb", "Xi8", "Xi16", "Xi32", "Xi64", "Xu8", "Xu16", "Xu32", "Xu64", "Xf16", "Xbf16", "Xf32", "Xf64"]
    lines = _run(kernel, capfd, *tensors)
    assert {(b, t) for b, t, _ in lines} == {((0, 0, 0), None)}
    texts = [text for _, _, text in lines]
    whole = _elements(texts[: N * len(DTYPES)])
    assert [(name, idx[0]) for _, name, idx, _ in whole] == [(n, i) for n in names for i in range(N)]
    for msg, name, (i,), text in whole:
        assert msg is None
        assert same_value(text, tensors[names.index(name)][i]), (name, i, text, tensors[names.index(name)][i])
    rest = texts[N * len(DTYPES):]
    assert len(rest) == 2 * N
    f32, u64 = tensors[names.index("Xf32")], tensors[names.index("Xu64")]
    for i in range(N):
        m = re.fullmatch(r"Xf32\[i\] at \[(\d+)\] = (\S+)", rest[2 * i])
        assert m and int(m.group(1)) == i and same_value(m.group(2), f32[i]), rest[2 * i]
        assert rest[2 * i + 1] == f"u64 at [{i}] = {int(u64[i].item())}"
    if path[1] == "llvm":
        ir = kernel.get_kernel_source()
        assert re.search(r"call i32 \(ptr, \.\.\.\) @printf\(", ir), "printf must be called through its variadic type"
    else:
        src = kernel.get_kernel_source()
        assert src.count("printf(") == src.count("fflush(stdout);") > 0


# -- scopes, regions, several blocks ------------------------------------------------------------


def scopes_kernel():
    @T.prim_func
    def scopes(A: T.Tensor((4, 6), T.float32), G: T.Tensor((2, 3, 4), T.int32)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            S = T.alloc_shared((2, 3), T.float32)
            F = T.alloc_fragment((2, 3), T.float32)
            L = T.alloc_local((2,), T.int64)
            T.copy(A[by * 2, bx * 3], S)
            for i, j in T.Parallel(2, 3):
                F[i, j] = S[i, j] * 2
            L[0] = bx * 10 + by
            L[1] = -(2**40)
            T.print(S, msg="shared tile")
            T.print(F)
            T.print(L)
            T.print(G[by, 1:3, bx:bx + 2])

    return scopes


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_buffers_of_every_scope_print_once_per_block_with_their_indices(path, capfd):
    kernel = _compile(scopes_kernel(), path)
    a = torch.randn(4, 6)
    g = torch.randint(-1000, 1000, (2, 3, 4), dtype=torch.int32)
    blocks = _by_block(_run(kernel, capfd, a, g))
    assert sorted(blocks) == [(bx, by, 0) for bx in range(2) for by in range(2)]
    for (bx, by, _), texts in blocks.items():
        got = _elements(texts)
        want = [("shared tile", "S", (i, j), a[by * 2 + i, bx * 3 + j]) for i in range(2) for j in range(3)]
        want += [(None, "F", (i, j), 2 * a[by * 2 + i, bx * 3 + j]) for i in range(2) for j in range(3)]
        want += [(None, "L", (0,), torch.tensor(bx * 10 + by)), (None, "L", (1,), torch.tensor(-(2**40)))]
        want += [(None, "G", (by, i, j), g[by, i, j]) for i in range(1, 3) for j in range(bx, bx + 2)]
        assert [(m, n, idx) for m, n, idx, _ in got] == [(m, n, idx) for m, n, idx, _ in want]
        for (_, _, idx, text), (_, name, _, value) in zip(got, want):
            assert same_value(text, value), (name, idx, text, value)


def dynamic_kernel():
    n = T.dynamic("n")

    @T.prim_func
    def dynamic(A: T.Tensor((n,), T.float64)):
        with T.Kernel(T.ceildiv(n, 4), threads=1) as bx:
            T.print(A[bx * 4:bx * 4 + 4], msg="tile")  # the last tile is cut at n
            if bx == 0:
                T.print(n, msg="n")

    return dynamic


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_a_dynamic_shape_prints_the_elements_inside_the_buffer(path, capfd):
    kernel = _compile(dynamic_kernel(), path)
    for n in (10, 3):
        a = torch.randn(n, dtype=torch.float64)
        blocks = _by_block(_run(kernel, capfd, a))
        assert sorted(blocks) == [(b, 0, 0) for b in range(-(-n // 4))]
        for (bx, _, _), texts in blocks.items():
            if bx == 0:
                assert texts[-1] == f"n = {n}"
                texts = texts[:-1]
            got = _elements(texts)
            assert [idx for _, _, idx, _ in got] == [(i,) for i in range(bx * 4, min(n, bx * 4 + 4))]
            assert all(m == "tile" and name == "A" for m, name, _, _ in got)
            assert all(float(text) == a[i].item() for _, _, (i,), text in got)  # %.17g: exact


def control_kernel():
    @T.prim_func
    def control(X: T.Tensor((3, 4), T.int32), Y: T.Tensor((3,), T.float32)):
        with T.Kernel(3, 2, threads=1) as (bx, by):
            T.print(msg="start 100%\nof \"it\"?")
            total = T.alloc_var(T.int32, 0)
            for i in T.serial(4):
                total = total + X[bx, i]
                if i % 2 == 1:
                    T.print(X[bx, i])
            T.print(total, msg="row sum")
            if by == 1:
                T.print(bx * 10 + by)
                T.print(Y[bx] > 0)
            else:
                T.print(Y[bx] * 2)

    return control


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_messages_branches_loops_and_expressions(path, capfd):
    kernel = _compile(control_kernel(), path)
    x = torch.randint(-50, 50, (3, 4), dtype=torch.int32)
    y = torch.tensor([1.5, -0.25, 3.0])
    blocks = _by_block(_run(kernel, capfd, x, y))
    assert sorted(blocks) == [(bx, by, 0) for bx in range(3) for by in range(2)]
    for (bx, by, _), texts in blocks.items():
        want = ['start 100%\\nof "it"?']
        want += [f"X[bx, i] at [{bx}, {i}] = {int(x[bx, i])}" for i in (1, 3)]
        want.append(f"row sum = {int(x[bx].sum())}")
        if by == 1:
            want += [f"bx * 10 + by = {bx * 10 + by}", f"Y[bx] > T.float32(0.0) = {'true' if y[bx] > 0 else 'false'}"]
        else:
            want.append(f"Y[bx] * T.float32(2.0) = {float(y[bx] * 2):.9g}")
        assert texts == want


def parallel_kernel(blocks: int, work: int):
    @T.prim_func
    def many_blocks(A: T.Tensor((blocks, work), T.float32), B: T.Tensor((blocks,), T.float32)):
        with T.Kernel(blocks, threads=1) as bx:
            acc = T.alloc_var(T.float32, 0)
            for k in T.serial(work):
                acc = acc + A[bx, k]
            B[bx] = acc
            for r in T.serial(4):
                T.print(A[bx, r], msg=f"message long enough to show a torn line {'=' * 60}")
            T.print(acc, msg="acc")

    return many_blocks


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_blocks_running_in_parallel_print_whole_lines(path, capfd):
    """Enough work for the block loop to run in parallel: lines of different blocks may interleave,
    but each is whole, and every block's lines are there, in order within the block."""
    blocks, work = 64, 2048
    kernel = _compile(parallel_kernel(blocks, work), path)
    src = kernel.get_kernel_source()
    assert ("tl_run_blocks" in src) if path[1] == "c" else ("TVMBackendParallelLaunch" in src)
    a = torch.randn(blocks, work)
    b = torch.zeros(blocks)
    got = _by_block(_run(kernel, capfd, a, b))
    assert sorted(got) == [(bx, 0, 0) for bx in range(blocks)]
    msg = f"message long enough to show a torn line {'=' * 60}"
    for (bx, _, _), texts in got.items():
        assert len(texts) == 5
        for r, text in enumerate(texts[:4]):
            m = re.fullmatch(re.escape(msg) + r" at \[(\d+), (\d+)\] = (\S+)", text)
            assert m and (int(m.group(1)), int(m.group(2))) == (bx, r) and same_value(m.group(3), a[bx, r]), text
        assert same_value(texts[4].removeprefix("acc = "), b[bx])


_FLUSH_SCRIPT = """
import os, sys
import torch
import tilelang
import tilelang.language as T
from tilelang_core.backends.selection import select_backend


@T.prim_func
def flushed(A: T.Tensor((3,), T.float32)):
    with T.Kernel(3, threads=1) as bx:
        T.print(A[bx], msg="value")


for backend, target in {paths!r}:
    try:
        select_backend(backend, target)
    except Exception:
        os.write(1, f"SKIP {{backend}}-{{target}}\\n".encode())
        continue
    kernel = tilelang.compile(flushed, target=target, execution_backend=backend)
    kernel(torch.tensor([0.5, 1.5, 2.5]))
    os.write(1, f"RETURNED {{backend}}-{{target}}\\n".encode())  # past the C library's stdout buffer
os._exit(0)  # no flush at exit: what is not written by now is lost
"""


def test_lines_are_written_out_when_the_call_returns(tmp_path):
    """A process whose standard output is a pipe (fully buffered by the C library; Python's ``-u``
    and PYTHONUNBUFFERED, which make it unbuffered, are off): every line a call prints is in the
    pipe when the call returns, before what the caller writes next."""
    import os
    import subprocess
    import sys

    script = tmp_path / "flushed.py"
    script.write_text(_FLUSH_SCRIPT.format(paths=PATHS))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = os.pathsep.join([str(_HERE.parent)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = []
    for backend, target in PATHS:
        if f"SKIP {backend}-{target}" in proc.stdout:
            want.append(f"SKIP {backend}-{target}")
            continue
        want += [f"T.print block=({b}, 0, 0): value at [{b}] = {b + 0.5}" for b in range(3)]
        want.append(f"RETURNED {backend}-{target}")
    assert proc.stdout.splitlines() == want


# -- CUDA ---------------------------------------------------------------------------------------


def cuda_kernel(dtype: str):
    @T.prim_func
    def cuda_print(A: T.Tensor((64, 64), dtype), B: T.Tensor((64,), T.int64)):
        with T.Kernel(4, 2, threads=128) as (bx, by):
            S = T.alloc_shared((16, 16), dtype)
            F = T.alloc_fragment((16, 16), T.float32)
            L = T.alloc_local((2,), T.uint64)
            T.copy(A[by * 16, bx * 16], S)
            T.print(S, msg="shared")
            for i, j in T.Parallel(16, 16):
                F[i, j] = T.cast(S[i, j], T.float32)
            T.print(F, warp_group_id=0, warp_id=2)
            L[0] = T.cast(B[bx], T.uint64)
            T.print(L)
            T.print(B, msg="global")
            T.print(A[bx, by])
            T.print(msg="done")

    return cuda_print


_CUDA_DTYPES = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "bool"]


@pytest.fixture(scope="module")
def cuda_sources():
    sources = {dtype: lower(cuda_kernel(dtype), target="cuda") for dtype in _CUDA_DTYPES}
    # a 64 KB accumulator: printed through a 16 KB shared tile, in chunks (static shared memory is
    # limited to 48 KB per block)
    sources["big_fragment"] = lower(fragment_kernel(128, 128, "float32"), target="cuda")
    return sources


def test_cuda_source_calls_device_printf(cuda_sources):
    src = cuda_sources["float32"].device_source
    assert re.search(r"__device__ __noinline__ int tl_print_\w+\(", src)
    assert 'printf("T.print block=(%d, %d, %d) thread=(%d, %d, %d): shared: S[%lld, %lld] = %.9g\\012"' in src
    assert "fflush" not in src  # device printf is flushed by the driver at synchronisation
    # one thread prints a tile: thread 0 the shared one, warp 2 (thread 64) the fragment
    assert re.search(r"if \(\(\(int\)threadIdx\.x\) == 0\) \{\s*for \(int S_print_i0", src)
    assert re.search(r"if \(\(\(int\)threadIdx\.x\) == 64\) \{\s*for \(int F_print_i", src)
    # the fragment is read by its owners into a shared tile, then after a barrier by the printer
    stage = src.index("F_print_g_flat")  # the copy nest (its shared tile merged with S's memory)
    assert "__syncthreads();" in src[stage:src.index("F_print_i")]
    assert cuda_sources["float8_e4m3fn"].device_source.count("%.3g") == 2  # S and A[bx, by]


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_sources, tmp_path):
    CU.compile_translation_units(cuda_sources, tmp_path, arch="sm_90")


def fragment_kernel(m: int, n: int, dtype: str):
    @T.prim_func
    def fragment_print(A: T.Tensor((m, 2 * n), dtype), B: T.Tensor((m, 2 * n), dtype)):
        with T.Kernel(2, threads=64) as bx:
            F = T.alloc_fragment((m, n), dtype)
            T.copy(A[0, bx * n], F)
            for i, j in T.Parallel(m, n):
                F[i, j] = F[i, j] * 2 + 1
            T.print(F, msg="frag", warp_id=1)
            T.print(F[m - 2:m, n - 3:n], msg="corner")
            T.copy(F, B[0, bx * n])

    return fragment_print


@CU.emulator
@pytest.mark.parametrize("m,n,dtype", [(16, 16, "float32"), (50, 90, "float64")], ids=["one-chunk", "chunked"])
def test_emulated_gpu_prints_the_real_fragment_values(m, n, dtype, tmp_path, capfd):
    """The fragment is spread over the block's 64 threads; the printing thread (warp 1: thread 32)
    prints every element with its value, read through a shared tile the owners copy it into: the
    whole fragment at once, or (50 x 90 float64: 36 KB) in chunks of 2048 elements. A region of it
    (the corner) prints its elements only, with the fragment's indices."""
    from tilelang_core.lowering.atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END

    art = lower(fragment_kernel(m, n, dtype), target="cuda")
    src = art.device_source
    ctype = {"float32": "float", "float64": "double"}[dtype]
    regs = -(-m * n // 64)
    assert re.search(rf"{ctype} F_ptr\[{regs}\];", src), "the fragment must stay in registers"
    chunk = min(m * n, 16384 // (8 if dtype == "float64" else 4) // 64 * 64)
    assert re.search(rf"__shared__ alignas\(\d+\) {ctype} F_printed_ptr\[{chunk}\];", src)
    helpers = src[src.index(CUDA_HELPERS_BEGIN):src.index(CUDA_HELPERS_END)]
    body = src[src.index('extern "C" __global__'):]
    # the emulator compiles what follows the first kernel: put the device helpers behind a dummy one
    emulated_source = ('extern "C" __global__ void tl_emulator_unused() {}\n#include <cstdio>\n'
                       "#define __device__\n#define __noinline__\n" + helpers + "\n" + body)
    run = CU._emulated(types.SimpleNamespace(device_source=emulated_source, device_kernels=art.device_kernels,
                                             symbols=art.symbols), tmp_path)
    tdt = getattr(torch, dtype)
    a = torch.randn(m, 2 * n, dtype=tdt)
    b = torch.zeros(m, 2 * n, dtype=tdt)
    capfd.readouterr()
    run(a, b)
    ctypes.CDLL(None).fflush(None)
    out = capfd.readouterr().out
    torch.testing.assert_close(b, a * 2 + 1)
    _check_fragment_lines(out, b, m, n)


def _check_fragment_lines(out: str, b: torch.Tensor, m: int, n: int) -> None:
    """The lines of :func:`fragment_kernel`'s two blocks: the whole fragment from thread 32, its
    corner from thread 0, each element equal to the output ``b``."""
    lines = [LINE.fullmatch(line) for line in out.splitlines()]
    assert all(lines)
    blocks: dict = {}
    for line in lines:  # the whole fragment from thread 32 (warp 1), the corner from thread 0
        thread = 32 if line.group(7).startswith("frag: ") else 0
        assert tuple(int(g) for g in line.groups()[3:6]) == (thread, 0, 0)
        blocks.setdefault(int(line.group(1)), []).append(line.group(7))
    assert sorted(blocks) == [0, 1]
    for bx, texts in blocks.items():
        got = _elements(texts)
        want = [("frag", (i, j)) for i in range(m) for j in range(n)]
        want += [("corner", (i, j)) for i in range(m - 2, m) for j in range(n - 3, n)]
        assert [(msg, idx) for msg, _, idx, _ in got] == want
        for _, name, (i, j), text in got:
            assert name == "F" and same_value(text, b[i, bx * n + j]), (i, j, text)


@pytest.mark.gpu
@CU.requires_gpu
def test_gpu_prints_the_real_fragment_values(capfd):
    import tilelang

    kernel = tilelang.compile(fragment_kernel(16, 16, "float32"), target="cuda")
    a = torch.randn(16, 32, device="cuda")
    b = torch.zeros(16, 32, device="cuda")
    capfd.readouterr()
    kernel(a, b)
    torch.cuda.synchronize()  # device printf reaches the process's stdout here
    out = capfd.readouterr().out
    torch.testing.assert_close(b, a * 2 + 1)
    _check_fragment_lines(out, b.cpu(), 16, 16)


# -- errors -------------------------------------------------------------------------------------


def _define(body):
    """Define a kernel whose body is ``body(A, V)`` (``A`` an (8,) float32 buffer)."""

    @T.prim_func
    def bad(A: T.Tensor((8,), T.float32), V: T.Tensor((8,), T.float16x2)):
        with T.Kernel(1, threads=32) as _:
            body(A, V)

    return bad


@pytest.mark.parametrize(
    "call,error,pattern",
    [
        (lambda A, V: T.print([A[0], A[1]]), OperandTypeError, r"T\.print\(.*\): obj must be a scalar expression .* got list"),
        (lambda A, V: T.print(A[0], msg=3), OperandTypeError, r"T\.print\(.*\): msg must be a str, got int"),
        (lambda A, V: T.print(), OperandCheckError, r"T\.print\(\): nothing to print"),
        (lambda A, V: T.print(msg=""), OperandCheckError, r"nothing to print: give obj"),
        (lambda A, V: T.print("hello"), OperandTypeError, r"got the str 'hello'; to print a message, pass it as msg"),
        (lambda A, V: T.print(A, warp_id=-1), OperandTypeError, r"warp_id must be an int >= 0, got -1"),
        (lambda A, V: T.print(A, warp_group_id=1.5), OperandTypeError, r"warp_group_id must be an int >= 0, got 1.5"),
        (lambda A, V: T.print(V[0]), OperandTypeError, r"vector value \(float16x2\)"),
    ],
    ids=["list", "msg-int", "nothing", "empty-msg", "str-obj", "warp-id", "warp-group-id", "vector"],
)
def test_bad_operands_are_refused_when_the_kernel_is_defined(call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        _define(call)
    assert re.match(r".*test_debug_print\.py:\d+: ", str(info.value)), str(info.value)


def test_metal_has_no_printf():
    with pytest.raises(LoweringError, match=r"test_debug_print\.py:\d+: T\.print cannot print on target metal "
                                            r"\(the Metal Shading Language has no printf\)"):
        lower(_define(lambda A, V: T.print(A[0])), target="metal")


def test_misplaced_prints_are_refused_when_lowering():
    @T.prim_func
    def outside(A: T.Tensor((8,), T.float32)):
        T.print(A[0])

    with pytest.raises(LoweringError, match=r"T\.print outside a T\.Kernel"):
        lower(outside, target="c")
    # the printing thread must exist
    with pytest.raises(LoweringError, match=r"warp_group_id \* 128 \+ warp_id \* 32 = 160 does not exist: "
                                            r"the block has 32 threads"):
        lower(_define(lambda A, V: T.print(A, warp_group_id=1, warp_id=1)), target="cuda")

    @T.prim_func
    def divergent(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            F = T.alloc_fragment((64,), T.float32)
            T.copy(A, F)
            tid = T.get_thread_binding()
            if tid == 0:
                T.print(F)

    with pytest.raises(LoweringError, match=r"T\.print\(F\) of a fragment under a condition that depends on the thread"):
        lower(divergent, target="cuda")

    @T.prim_func
    def in_parallel(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64) as _:
            F = T.alloc_fragment((64,), T.float32)
            for i in T.Parallel(64):
                F[i] = A[i]
                T.print(F)

    with pytest.raises(LoweringError, match=r"T\.print\(F\) of a fragment inside a T\.Parallel loop"):
        lower(in_parallel, target="cuda")


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_float8_values_are_refused_on_cpu_targets(target):
    @T.prim_func
    def f8(A: T.Tensor((4,), T.float8_e4m3fn)):
        with T.Kernel(1, threads=1) as _:
            T.print(A[0])

    with pytest.raises(LoweringError, match=r"T\.print of a float8_e4m3fn value on a CPU target: TVM 0\.27 cannot"):
        lower(f8, target=target, consumes=["device_source" if target == "c" else "runtime_module"])
