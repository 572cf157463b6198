"""Crash-hunt findings: wide ``T.vectorized`` loops, persistent workers of 0 or fewer, and the
cython dispatcher's limits.

* ``T.vectorized(n)`` with a constant ``n`` of 65536 or more wrote ``n mod 65536`` elements on
  ``llvm`` (and in CUDA source), 32768 <= ``n`` < 65536 stopped with TVM's "Check failed: lanes <
  32768" or stopped the process, LLVM took minutes for wide vectors, and a loop not starting at 0
  was refused on ``llvm`` (lowering/vector_lanes.py ``VectorLoopsForLlvm``).
* ``T.PersistentTileScheduler(..., num_workers=w)`` (or ``next_tile(step)``) with a run-time 0 or
  negative value never returned; a constant one was accepted (language/tile_schedule.py).
  ``T.Persistent`` with a run-time wave size of 0 reported a division by zero inside its own
  expansion, and a negative one wrote nothing without an error (language/core.py).
* A kernel past a limit of the cython dispatcher (17 dimensions, 257 parameters, 65 symbols, a
  shape expression nested 33 deep, 272 deferred checks) made its build hook raise ``ValueError``,
  which marked the backend broken for the rest of the process
  (plugins/cython_backend/tilelang_backend_cython/plan.py).

Calls that hung before run in a subprocess with a timeout, and so do the cython refusals (a
broken backend would spoil the tests after them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

CPU_PAIRS = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


def _run_script(tmp_path: Path, source: str, *args: str, timeout: int = 240) -> dict:
    """Run ``source`` (a script printing one JSON line last) in a fresh interpreter with its own
    kernel cache; fail the test when it does not finish in ``timeout`` seconds (a hang)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "cache"))
    try:
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script.name} {' '.join(args)} did not finish within {timeout} s (a kernel call hung)")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _line_of(source: str, text: str) -> int:
    """The line of ``source`` (as :func:`_run_script` writes it) holding ``text``."""
    lines = textwrap.dedent(source).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


# -- wide T.vectorized loops on llvm ---------------------------------------------------------------


_WIDE_SCRIPT = """
    import json, sys, torch, tilelang, tilelang.language as T
    n, start, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    @T.prim_func
    def scaled(A: T.Tensor((start + n,), dtype), B: T.Tensor((start + n,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.vectorized(start, start + n):
                B[i] = A[i] * T.cast(2, dtype) + T.cast(i % 100, dtype)

    kernel = tilelang.compile(scaled, target="llvm", execution_backend="tvm_ffi")
    torch_dtype = getattr(torch, dtype)
    a = torch.arange(start + n).remainder(50).to(torch_dtype)
    b = torch.full((start + n,), 7, dtype=torch_dtype)
    kernel(a, b)
    expected = b.clone()
    expected[start:] = a[start:] * 2 + torch.arange(start, start + n).remainder(100).to(torch_dtype)
    print(json.dumps({"wrong": (b != expected).sum().item()}))
"""


@pytest.mark.parametrize("n", [32768, 40000, 65536, 65537, 70000, 131072 + 300])
def test_wide_vectorized_loop_on_llvm_writes_every_element(tmp_path, n):
    """Every element, for extents TVM refused (32768, 65536), that stopped the process (40000:
    "LLVM ERROR: Cannot implicitly convert a scalable size", hence the subprocess) or wrapped
    (65537 and more wrote n mod 65536), multiples of the 256-lane chunk or not."""
    assert _run_script(tmp_path, _WIDE_SCRIPT, str(n), "0", "float32") == {"wrong": 0}


@pytest.mark.parametrize("dtype", ["int8", "int32", "float64"])
def test_wide_vectorized_loop_from_an_offset_and_of_other_dtypes(tmp_path, dtype):
    """A loop starting at 5 (the chunks start there, the elements before it stay as they were)
    over 65539 lanes of 8-, 32- and 64-bit values."""
    assert _run_script(tmp_path, _WIDE_SCRIPT, "65539", "5", dtype) == {"wrong": 0}


@pytest.mark.parametrize("n,start", [(8, 5), (256, 3)])
def test_narrow_vectorized_loop_from_an_offset_on_llvm(tmp_path, n, start):
    """``T.vectorized(5, 13)``: TVM's vectorizer refused a loop that does not start at 0 ("Check
    failed: (is_zero(op->min))"); it starts at 0 now and adds 5 to its variable."""
    assert _run_script(tmp_path, _WIDE_SCRIPT, str(n), str(start), "float32") == {"wrong": 0}


def test_wide_vectorized_loop_compiles_in_seconds_on_llvm(tmp_path):
    """32767 lanes (TVM's most) took LLVM minutes (207 s here for exp(a) * 2 + a); in chunks of 256
    lanes it takes well under a second."""
    result = _run_script(tmp_path, """
        import json, time, torch, tilelang, tilelang.language as T
        N = 32767
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.vectorized(N):
                    B[i] = T.exp(A[i]) * 2 + A[i]
        k = tilelang.compile(main, target="llvm", execution_backend="tvm_ffi")
        a = torch.randn(N); b = torch.zeros(N); k(a, b)
        print(json.dumps({"close": bool(torch.allclose(b, torch.exp(a) * 2 + a, rtol=1e-5, atol=1e-5))}))
    """, timeout=90)
    assert result == {"close": True}


def test_wide_vectorized_loop_in_cuda_source_stores_every_vector():
    """CUDA: 65540 lanes wrapped to 4, and the source stored the first float4 only."""

    @T.prim_func
    def scaled(A: T.Tensor((65540,), "float32"), B: T.Tensor((65540,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.vectorized(65540):
                B[i] = A[i] * 2

    source = lower(scaled, target="cuda").device_source
    # 16385 float4 stores: a loop left to nvcc (more than 4096 iterations, lowering/dynamic_unroll.py)
    assert "*(float4*)(B_ptr + (i_outer * 4)) = " in source and "i_outer < 16385" in source, source[-800:]


@T.prim_func
def _nested_vectors(A: T.Tensor((2, 4, 8), "float32"), B: T.Tensor((2, 4, 8), "float32")):
    with T.Kernel(1, threads=1) as bx:
        for i in T.vectorized(2):
            for j in T.vectorized(4):
                for l in T.vectorized(8):
                    B[i, j, l] = A[i, j, l] * 2 + 1


@pytest.mark.parametrize(("backend", "target"), [("cython", "c"), ("tvm_ffi", "llvm"), ("tvm_ffi", "c")])
def test_nested_vectorized_loops_run(backend, target):
    """Nested ``T.vectorized``: TVM's vectorizer left the inner loop vectorized ("Detect vectorize
    inside vectorized loop, ignoring") and ``llvm`` stopped with "cannot handle for type vectorized";
    the innermost loop is the vector now, the loops around it serial."""
    kernel = tilelang.compile(_nested_vectors, execution_backend=backend, target=target)
    a = torch.randn(2, 4, 8)
    b = torch.zeros_like(a)
    kernel(a, b)
    assert torch.equal(b, a * 2 + 1)


def test_nested_vectorized_loops_keep_the_innermost_vector_in_cuda_source():
    source = lower(_nested_vectors, target="cuda").device_source
    assert source.count("*(float4*)(B_ptr + ") == 2  # 8 lanes: two float4 stores, in serial i, j loops
    assert "for (int i = 0; i < 2; ++i)" in source


# -- persistent workers ----------------------------------------------------------------------------

_SCHEDULER_SCRIPT = """
    import json, sys, torch, tilelang, tilelang.language as T
    backend, target = sys.argv[1], sys.argv[2]
    M = 64

    @T.prim_func
    def workers_kernel(A: T.Tensor((M, M), "float32"), workers: T.int32):
        with T.Kernel(4) as bx:
            s = T.PersistentTileScheduler(8, 8, num_workers=workers)
            s.init(bx)
            while s.valid():
                for i, j in T.Parallel(8, 8):
                    A[s.m_idx * 8 + i, s.n_idx * 8 + j] = 1.0
                s.next_tile()

    @T.prim_func
    def step_kernel(A: T.Tensor((M, M), "float32"), step: T.int32):
        with T.Kernel(4) as bx:
            s = T.PersistentTileScheduler(8, 8, num_workers=4)
            s.init(bx)
            while s.valid():
                for i, j in T.Parallel(8, 8):
                    A[s.m_idx * 8 + i, s.n_idx * 8 + j] = 1.0
                s.next_tile(step)

    out = {}
    for name, func in (("workers", workers_kernel), ("step", step_kernel)):
        k = tilelang.compile(func, target=target, execution_backend=backend)
        for value in (4, 0, -3):
            A = torch.zeros(M, M)
            try:
                k(A, value)
                out[f"{name}={value}"] = ["returned", A.sum().item()]
            except Exception as e:
                out[f"{name}={value}"] = [type(e).__name__, str(e), A.sum().item()]
    print(json.dumps(out))
"""


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_run_time_worker_counts_below_one_raise(tmp_path, backend, target):
    """A run-time num_workers or next_tile step of 0 or less raises naming it (the calls never
    returned), before anything is written (a step: after each worker's first tile); 4 covers the
    64 x 64 tensor."""
    out = _run_script(tmp_path, _SCHEDULER_SCRIPT, backend, target, timeout=120)
    line = {name: _line_of(_SCHEDULER_SCRIPT, text) for name, text in (
        ("workers", "num_workers=workers)"), ("step", "s.next_tile(step)"))}
    for name, what in (("workers", "T.PersistentTileScheduler: num_workers = workers"),
                       ("step", "T.PersistentTileScheduler: next_tile's step = step")):
        assert out[f"{name}=4"] == ["returned", 4096.0]
        for value, got in ((0, "got 0"), (-3, "got a negative value")):
            kind, message, written = out[f"{name}={value}"]
            func = f"{name}_kernel"
            assert kind == "RuntimeError", out[f"{name}={value}"]
            # a step is checked where it is taken: after each worker's first tile (64 elements)
            assert written == 0.0 if name != "step" else written in (64.0, 128.0, 192.0, 256.0), written
            assert message.startswith(f"{func}() failed: T.device_assert failed at "), message
            assert f"script.py:{line[name]}: {what} must be at least 1, {got} (worker w takes the tiles" in message


@T.prim_func
def _persistent_tiles(A: T.Tensor((64, 64), "float32"), workers: T.int32):
    with T.Kernel(4) as bx:
        for mi, ni in T.Persistent([8, 8], workers, bx):
            for i, j in T.Parallel(8, 8):
                A[mi * 8 + i, ni * 8 + j] = 1.0


@pytest.mark.parametrize("backend,target", CPU_PAIRS)
def test_persistent_run_time_wave_size_below_one_raises(backend, target):
    """T.Persistent's run-time wave size: 0 was a division by zero inside its expansion ("the
    divisor workers of (workers + 63) // workers is 0"), -3 wrote nothing without an error."""
    kernel = tilelang.compile(_persistent_tiles, target=target, execution_backend=backend)
    a = torch.zeros(64, 64)
    kernel(a, 4)
    assert a.sum().item() == 4096.0
    line = _line_of(Path(__file__).read_text(), "in T.Persistent([8, 8], workers, bx):")
    for value, got in ((0, "got 0"), (-3, "got a negative value")):
        a = torch.zeros(64, 64)
        with pytest.raises(RuntimeError) as info:
            kernel(a, value)
        message = str(info.value)
        assert message.startswith("_persistent_tiles() failed: T.device_assert failed at "), message
        assert (f"test_crash_hunt_fixes.py:{line}: T.Persistent: wave_size = workers must be at least 1, {got} "
                "(worker w takes the tiles") in message, message
        assert a.sum().item() == 0.0


def test_persistent_wave_count_divides_by_at_least_one():
    """The wave loop's extent divides by ``max(wave_size, 1)`` and is 0 below 1, so a target that
    drops ``T.device_assert`` (Metal, ROCm) runs no wave instead of dividing by 0; on CPU targets
    the division was checked on its own, a second report of the same mistake."""
    source = lower(_persistent_tiles, target="c").device_source
    assert "integer division by zero" not in source
    assert "T.Persistent: wave_size = workers must be at least 1" in source


@pytest.mark.parametrize("value", [0, -2])
def test_constant_worker_counts_below_one_are_refused_at_definition(value):
    """Constant strides below 1 are refused where the kernel is defined (they were accepted, and
    the call never returned)."""
    with pytest.raises(LoweringError, match=rf"test_crash_hunt_fixes.py:\d+: T.PersistentTileScheduler: num_workers "
                                            rf"must be at least 1, got {value} \(.*pass the number of workers"):
        @T.prim_func
        def workers(A: T.Tensor((8, 8), "float32")):
            with T.Kernel(4) as bx:
                s = T.PersistentTileScheduler(8, 8, num_workers=value)
                s.init(bx)
                while s.valid():
                    A[s.m_idx, s.n_idx] = 1.0
                    s.next_tile()

    with pytest.raises(LoweringError, match=rf"T.PersistentTileScheduler: next_tile's step must be at least 1, "
                                            rf"got {value} \(.*pass a step of at least 1"):
        @T.prim_func
        def step(A: T.Tensor((8, 8), "float32")):
            with T.Kernel(4) as bx:
                s = T.PersistentTileScheduler(8, 8, num_workers=4)
                s.init(bx)
                while s.valid():
                    A[s.m_idx, s.n_idx] = 1.0
                    s.next_tile(value)


@pytest.mark.parametrize("value", [0, -2])
def test_persistent_constant_wave_size_expression_below_one_is_refused(value):
    """``T.int32(0)`` was let through (only a Python int was checked)."""
    # T.Persistent's ValueError reaches the caller as TVMScript's DiagnosticError (a RuntimeError)
    with pytest.raises((ValueError, RuntimeError), match=rf"T.Persistent: wave_size must be at least 1, got {value}"):
        @T.prim_func
        def persistent(A: T.Tensor((8, 8), "float32")):
            with T.Kernel(4) as bx:
                for mi, ni in T.Persistent([8, 8], T.int32(value), bx):
                    A[mi, ni] = 1.0


# -- the cython dispatcher's limits ----------------------------------------------------------------

_LIMIT_SCRIPT = """
    import importlib.util, json, sys, warnings, torch, tilelang, tilelang.language as T
    from tilelang_core.errors import KernelNotSupportedError
    spec = importlib.util.spec_from_file_location("limit_kernels", sys.argv[1])
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    out = {}
    try:
        tilelang.compile(mod.kernel, target="c", execution_backend="cython")
        out["cython"] = "built"
    except Exception as e:
        out["cython"] = [type(e).__name__, str(e)]

    @T.prim_func
    def one_d(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                A[i] = A[i] + 1.0

    try:
        k = tilelang.compile(one_d, target="c", execution_backend="cython")
        a = torch.arange(4.0); k(a)
        out["one_d"] = a.tolist()
    except Exception as e:
        out["one_d"] = [type(e).__name__, str(e)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = tilelang.compile(mod.kernel, target="c", execution_backend="auto")
    out["auto"] = k.backend.name
    out["warned"] = any("KernelNotSupportedError" in str(w.message) for w in caught)
    out["ran"] = mod.check(k)
    print(json.dumps(out))
"""

_LIMIT_KERNELS = {
    "dims": ("parameter 'A' has 17", """
        import torch, tilelang.language as T
        shape = (1,) * 16 + (4,)
        @T.prim_func
        def kernel(A: T.Tensor(shape, "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(4):
                    A[(0,) * 16 + (i,)] = 1.0
        def check(k):
            a = torch.zeros(shape); k(a)
            return a.sum().item() == 4.0
    """),
    "params": ("at most 256 parameters, the kernel has 258", """
        import torch, tilelang.language as T
        @T.prim_func
        def kernel(A: T.Tensor((1,), "int32"), {scalars}):
            with T.Kernel(1) as bx:
                A[0] = s0 + s128 * 1000 + s256 * 1000000
        def check(k):
            a = torch.zeros(1, dtype=torch.int32); k(a, *range(1, 258))
            return a.item() == 1 + 129 * 1000 + 257 * 1000000
    """),
    "symbols": ("at most 64 shape symbols, the kernel uses 65", """
        import torch, tilelang.language as T
        n = [T.dynamic(f"n{{i}}") for i in range(65)]
        @T.prim_func
        def kernel(A0: T.Tensor(n[0:13], "int8"), A1: T.Tensor(n[13:26], "int8"), A2: T.Tensor(n[26:39], "int8"),
                   A3: T.Tensor(n[39:52], "int8"), A4: T.Tensor(n[52:65], "int8")):
            with T.Kernel(1) as bx:
                A4[(0,) * 13] = 5
        def check(k):
            a = [torch.zeros((1,) * 13, dtype=torch.int8) for _ in range(5)]; k(*a)
            return a[4].item() == 5
    """),
    "depth": ("nested at most 30 deep", """
        import torch, tilelang.language as T
        n, m = T.dynamic("n"), T.dynamic("m")
        e = m
        for i in range(32):
            e = (n if i % 2 else m) - e   # n - (m - (n - ... (m - m)))
        @T.prim_func
        def kernel(A: T.Tensor((n, m), "int8"), B: T.Tensor((e,), "float32")):
            with T.Kernel(1) as bx:
                B[0] = 1.0
        def check(k):
            size = 2
            for i in range(32):
                size = (3 if i % 2 else 2) - size   # e with n = 3, m = 2: 18
            a = torch.zeros(3, 2, dtype=torch.int8); b = torch.zeros(size); k(a, b)
            return b[0].item() == 1.0 and b[1:].sum().item() == 0.0
    """),
    "deferred": ("at most 256 input dimensions given by an expression and fixed strides per call, "
                 "the kernel has 272", """
        import torch, tilelang.language as T
        n = T.dynamic("n")
        s = (n + 1,) * 16
        @T.prim_func
        def kernel(N: T.Tensor((n,), "int8"), {tensors}):
            with T.Kernel(1) as bx:
                B16[(0,) * 16] = 3
        def check(k):
            t = [torch.zeros((1,) * 16, dtype=torch.int8) for _ in range(17)]; k(torch.zeros(0, dtype=torch.int8), *t)
            return t[16].item() == 3
    """),
}


def _limit_kernel_source(limit: str) -> str:
    """The module defining ``kernel`` (past ``limit``) and ``check(compiled)``."""
    source = textwrap.dedent(_LIMIT_KERNELS[limit][1])
    return source.format(scalars=", ".join(f"s{i}: T.int32" for i in range(257)),
                         tensors=", ".join(f'B{i}: T.Tensor(s, "int8")' for i in range(17)))


@pytest.mark.parametrize("limit", list(_LIMIT_KERNELS))
def test_cython_refuses_a_kernel_past_its_limits_and_stays_usable(tmp_path, limit):
    """KernelNotSupportedError naming the limit (it was a ValueError that marked the backend broken:
    even a 1-D kernel failed after it); ``auto`` builds the kernel with tvm_ffi, which runs it."""
    kernels = tmp_path / "limit_kernels.py"
    kernels.write_text(_limit_kernel_source(limit))
    out = _run_script(tmp_path, _LIMIT_SCRIPT, str(kernels))
    kind, message = out["cython"]
    assert kind == "KernelNotSupportedError", out["cython"]
    assert message.startswith("execution backend 'cython' does not support kernel 'kernel' for target 'c': "
                              "the cython backend "), message
    assert _LIMIT_KERNELS[limit][0] in message and message.endswith("; use execution_backend='tvm_ffi'"), message
    assert out["one_d"] == [1.0, 2.0, 3.0, 4.0]
    assert out["auto"] == "tvm_ffi" and out["warned"] and out["ran"], out
