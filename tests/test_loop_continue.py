"""``continue`` in kernels (lowering/loop_control.py): checked against its loop like ``break``.

Before, ``continue`` went to TVM unchecked: in a ``T.unroll`` loop inside a serial loop an unrolled
copy's ``continue`` skipped the rest of the *outer* iteration (every later copy: wrong values on c
and llvm), in ``T.vectorized`` LLVM dropped it (the skipped lanes were written), and a ``T.unroll``
loop alone did not compile (c: "continue statement not within a loop"; llvm: a TVM check)."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from backend_pairs import cpu_pairs  # noqa: E402
from source_lines import marked_line  # noqa: E402


def _unroll_in_serial():
    @T.prim_func
    def k(A: T.Tensor((2, 4), "int32"), B: T.Tensor((2, 4), "int32")):
        with T.Kernel(1, threads=1) as _:
            for j in range(2):
                for i in T.unroll(4):
                    if A[j, i] == 1:
                        continue  # <unroll-continue>
                    B[j, i] = A[j, i] + 10

    return k


def _vectorized():
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.vectorized(8):
                if A[i] > 4:
                    continue  # <vectorized-continue>
                B[i] = A[i] + 1

    return k


@pytest.mark.parametrize("make, marker, what", [
    (_unroll_in_serial, "unroll-continue", "a T.unroll loop"),
    (_vectorized, "vectorized-continue", "a T.vectorized loop"),
], ids=["unroll", "vectorized"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_continue_in_unrolled_and_vectorized_loops_is_refused_at_its_line(make, marker, what, backend, target):
    with pytest.raises(LoweringError) as info:
        tilelang.compile(make(), target=target, execution_backend=backend)
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{marked_line(_THIS, marker)}: continue would end an iteration of {what}"), text
    assert "put the rest of the body under an if instead" in text


@T.prim_func
def _continues(A: T.Tensor((16,), "int32"), B: T.Tensor((4, 16), "int32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(16):
            if A[i] % 3 == 0:
                continue
            B[0, i] = A[i] + 1
        for i in T.Parallel(16):
            if A[i] % 2 == 0:
                continue
            B[1, i] = A[i] * 2
        for i in T.parallel(16):
            if A[i] > 9:
                continue
            B[2, i] = -A[i]
        n = T.alloc_var("int32")
        n = 0
        while n < 16:
            n = n + 1
            if A[n - 1] < 5:
                continue
            B[3, n - 1] = 7


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_continue_in_serial_parallel_and_while_loops_skips_one_iteration(backend, target):
    kernel = tilelang.compile(_continues, target=target, execution_backend=backend)
    a = torch.arange(16, dtype=torch.int32)
    b = torch.zeros(4, 16, dtype=torch.int32)
    kernel(a, b)
    want = torch.zeros(4, 16, dtype=torch.int32)
    want[0] = torch.where(a % 3 == 0, 0, a + 1)
    want[1] = torch.where(a % 2 == 0, 0, a * 2)
    want[2] = torch.where(a > 9, 0, -a)
    want[3] = torch.where(a < 5, 0, 7)
    assert torch.equal(b, want), b


@T.prim_func
def _parallel_continue(A: T.Tensor((4, 128), "float32"), B: T.Tensor((4, 128), "float32")):
    with T.Kernel(1, threads=128) as _:
        for k in T.serial(4):
            for i in T.Parallel(128):
                if A[k, i] > 3.0:
                    continue  # <parallel-continue>
                B[k, i] = A[k, i] + 1.0


def test_continue_in_t_parallel_is_refused_on_gpu_targets():
    """GPU targets spread a T.Parallel nest over threads: the continue ended the enclosing serial
    loop's iteration for those threads (skipping later statements and barriers), or, with no loop
    left, did not compile ("a continue statement may only be used within a loop")."""
    from tilelang_core.lowering import lower

    with pytest.raises(LoweringError) as info:
        lower(_parallel_continue, target="cuda -arch=sm_90")
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{marked_line(_THIS, 'parallel-continue')}: continue would end an iteration of a "
                           "parallel loop, which GPU targets spread over the block's threads"), text
    assert "(on CPU targets T.Parallel and T.parallel too)" in text
    lower(_parallel_continue, target="c")  # the loop nest stays on CPU targets


def _run_time_unrolls():
    """``continue`` and ``break`` in T.unroll loops that stay loops: a run-time extent (alone, and
    inside a serial loop) and a constant extent past what lowering unrolls (dynamic_unroll.py)."""
    N = T.dynamic("N")

    @T.prim_func
    def k(A: T.Tensor((N,), "int32"), B: T.Tensor((4, N), "int32")):
        with T.Kernel(1, threads=1) as _:
            for i in T.unroll(N):
                if A[i] % 3 == 0:
                    continue  # <run-time-unroll-continue>
                B[0, i] = A[i] + 10
            for j in T.serial(2):
                for i in T.unroll(N):
                    if A[i] % 2 == 0:
                        continue
                    B[1, i] = A[i] + j
            for i in T.unroll(4096):
                if i >= N:
                    break
                if A[i] > 5:
                    continue
                B[2, i] = -A[i]
            for i in T.unroll(N):
                if A[i] == 7:
                    break
                B[3, i] = 1

    return k


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_continue_and_break_in_run_time_unroll_loops_run_as_in_python(monkeypatch, backend, target):
    """Before, such a continue was refused as if the loop were unrolled into copies ("continue would
    end an iteration of a T.unroll loop, which is unrolled into copies of its body")."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(_run_time_unrolls(), target=target, execution_backend=backend)
    a = torch.arange(10, dtype=torch.int32)
    b = torch.zeros(4, 10, dtype=torch.int32)
    kernel(a, b)
    want = torch.zeros(4, 10, dtype=torch.int32)
    want[0] = torch.where(a % 3 == 0, 0, a + 10)
    want[1] = torch.where(a % 2 == 0, 0, a + 1)
    want[2] = torch.where(a > 5, 0, -a)
    want[3, :7] = 1
    assert torch.equal(b, want), b


def test_continue_in_a_run_time_unroll_stays_in_a_pragma_unroll_loop_on_cuda(tmp_path):
    from tilelang_core.lowering import lower

    from private_modules import load_private

    artifact = lower(_run_time_unrolls(), target="cuda")
    lines = [line.strip() for line in artifact.device_source.splitlines()]
    loops = [i for i, line in enumerate(lines) if line.startswith("for (") and "< N" in line]
    assert loops and all(lines[i - 1] == "#pragma unroll" for i in loops), lines
    assert any(line.startswith("continue;") for line in lines) and any(line.startswith("break;") for line in lines)
    cuda = load_private("test_tileops_cuda", "test_tileops_cuda_for_loop_continue")
    if cuda.NVCC is not None:
        cuda.compile_translation_units({"run_time_unrolls": artifact}, tmp_path)
