"""A call that fails frees the kernel's workspaces (lowering/workspaces.py).

Before this, every call whose ``T.device_assert`` failed kept its ``T.alloc_global`` workspaces on
every CPU backend (the C entry returned before its ``free``; TVM's runtime modules returned
between ``TVMBackendAllocWorkspace`` and ``...FreeWorkspace``): 4 MiB per call for a 1M-float
workspace, so a program that retried a failing kernel ran out of memory. Measured here by the
resident memory the process keeps after many failing calls, which the kernel's writes make
count; and the next passing call must still give the right result.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

PAIRS = cpu_pairs()

MIB = 1 << 20


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def global_workspace_kernel(n: int):
    """One block: fills a T.alloc_global workspace, then asserts on it (a serial block loop)."""

    @T.prim_func
    def copy_checked(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        W = T.alloc_global((n,), T.float32)
        with T.Kernel(1) as _:
            for i in T.serial(n):
                W[i] = A[i]
            T.device_assert(W[0] > 0, "first element must be positive")
            for i in T.serial(n):
                B[i] = W[i] * 2.0

    return copy_checked


def two_kernels_kernel(n: int, block: int):
    """Two workspaces filled by a first T.Kernel; a second one, whose blocks run in parallel
    (on the C entry: an outlined block function), asserts."""

    @T.prim_func
    def staged(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        W1 = T.alloc_global((n,), T.float32)
        W2 = T.alloc_global((n,), T.float32)
        with T.Kernel(n // block) as bx:
            for i in T.serial(block):
                W1[bx * block + i] = A[bx * block + i]
                W2[bx * block + i] = A[bx * block + i] + 1.0
        with T.Kernel(n // block) as bx:
            for i in T.serial(block):
                T.device_assert(A[bx * block + i] > 0, "inputs must be positive")
                B[bx * block + i] = A[bx * block + i] * 2.0

    return staged


def block_local_kernel(n: int, local: int):
    """A per-block buffer too large for the stack of a runtime module (TVM's workspace pool),
    asserting after it was written."""

    @T.prim_func
    def per_block(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(n // local) as bx:
            L = T.alloc_local((local,), T.float32)
            for i in T.serial(local):
                L[i] = A[bx * local + i]
            T.device_assert(L[0] > 0, "block must start positive")
            for i in T.serial(local):
                B[bx * local + i] = L[i] * 2.0

    return per_block


CASES = {
    # kernel, elements, failing calls, bytes one failing call kept before the fix
    "one-global-workspace": (lambda: global_workspace_kernel(4 * MIB), 4 * MIB, 12, 16 * MIB),
    "two-workspaces-parallel-blocks": (lambda: two_kernels_kernel(2 * MIB, 4096), 2 * MIB, 12, 16 * MIB),
    "block-local-buffer": (lambda: block_local_kernel(1 << 16, 1 << 14), 1 << 16, 2000, 64 * 1024),
}


@pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated")
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend,target", PAIRS)
def test_failing_calls_free_their_workspaces(backend, target, case):
    make, n, calls, kept_per_call = CASES[case]
    kernel = tilelang.compile(make(), target=target, execution_backend=backend)
    good = torch.rand(n) + 0.5
    bad = good.clone()
    bad[0] = -1.0
    out = torch.empty(n)

    def fail_once():
        with pytest.raises(RuntimeError, match="T.device_assert failed"):
            kernel(bad, out)

    for _ in range(3):  # warm-up: pools, lazily loaded code
        fail_once()
    before = _resident_bytes()
    for _ in range(calls):
        fail_once()
    grown = _resident_bytes() - before
    leak_before_fix = calls * kept_per_call
    assert grown < leak_before_fix // 4, (
        f"{calls} failing calls kept {grown / MIB:.1f} MiB (a leak of the workspaces would keep "
        f"{leak_before_fix / MIB:.0f} MiB)")

    kernel(good, out)
    torch.testing.assert_close(out, good * 2.0)
